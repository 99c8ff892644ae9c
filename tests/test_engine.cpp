// The training-engine seam on one process: the order in which the solver calls its engine, the one gradient
// scale (1 / (replicas x iter_size)) and that the update really uses it, the optimizer applied on its own against
// the loop's step, MakeEngine's choice and refusals, the bucket plan the data-parallel engine reduces by, and the
// timeline. The data-parallel and pipeline engines themselves run under mpirun (tests/mpi).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/comm/collectives.hpp"
#include "strata/engine/bucket_plan.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/make_engine.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/optimizer.hpp"
#include "strata/parallel.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// x (2 x 6) -> ip1 (4 outputs: 24 weights, 4 biases) -> ip2 (3 outputs: 12 weights, 3 biases) -> softmax loss.
const char* kNet = R"(name: "engine"
layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 6 } shape { dim: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "z"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" }
)";

SolverParameter MakeParam(const std::string& extra) {
  SolverParameter p;
  ReadProtoFromTextString("base_lr: 0.5 lr_policy: 'fixed' random_seed: 7 display: 0 snapshot_after_train: false " +
                              extra,
                          &p);
  ReadProtoFromTextString(kNet, p.mutable_net_param());
  return p;
}

// Fixed inputs: x from a formula, labels 1 and 2.
void SetInputs(Net<float>* net) {
  float* x = net->blob_by_name("x")->mutable_cpu_data();
  for (int i = 0; i < 12; ++i) x[i] = std::sin(0.7f * i) + 0.1f * i;
  float* y = net->blob_by_name("y")->mutable_cpu_data();
  y[0] = 1;
  y[1] = 2;
}

std::vector<float> AllWeights(Solver<float>& solver) {
  std::vector<float> w;
  for (Blob<float>* p : solver.net()->learnable_params()) w.insert(w.end(), p->cpu_data(), p->cpu_data() + p->count());
  return w;
}

// An engine that logs what the solver asks of it, runs iterations as one process does, and claims `replicas`
// replicas (so the optimizer's gradient scale must follow) while summing nothing: the gradient it hands the update
// is one replica's.
class RecordingEngine : public TrainingEngine<float> {
 public:
  RecordingEngine(Solver<float>* solver, int replicas, std::vector<std::string>* calls)
      : local_(solver->net(), solver->optimizer(), solver->param().iter_size()), replicas_(replicas), calls_(calls) {}
  float Iterate(float rate, int iter) override {
    Log("Iterate " + std::to_string(iter));
    return local_.Iterate(rate, iter);
  }
  void Drain() override { Log("Drain"); }
  SignalAction AgreeOnAction(SignalAction local, int iter) override {
    Log("Agree " + std::to_string(iter));
    return local;
  }
  void ReduceScores(std::vector<float>* scores) override {
    Log("ReduceScores");
    for (float& s : *scores) s = 100 + s;  // a mark the solver's returned scores must carry
  }
  void AfterIteration(int n) override { Log("After " + std::to_string(n)); }
  void Finish(int n) override { Log("Finish " + std::to_string(n)); }
  int replicas() const override { return replicas_; }

 private:
  void Log(const std::string& s) {
    if (calls_) calls_->push_back(s);
  }
  LocalEngine<float> local_;
  int replicas_;
  std::vector<std::string>* calls_;
};

TEST(TrainingEngine, SolverCallsItsEngineInOrder) {
  auto solver = SolverRegistry<float>::Create(MakeParam("max_iter: 2 test_interval: 2 test_iter: 1"));
  std::vector<std::string> calls;
  solver->set_engine(std::make_unique<RecordingEngine>(solver.get(), 1, &calls));
  solver->SetActionFunction([] { return SignalAction::kNone; });
  solver->Solve();
  const std::vector<std::string> expected = {
      "Drain", "ReduceScores",                         // the test at iteration 0
      "Agree 0", "Iterate 0", "After 1",               // iteration 0
      "Agree 1", "Iterate 1", "After 2",               // iteration 1
      "Drain", "Finish 2",                             // the end of training
      "Drain", "ReduceScores"};                        // the final test
  EXPECT_EQ(calls, expected);
  // The scores the solver reports are the engine's reduction of them.
  calls.clear();
  const auto scores = solver->TestAll();
  ASSERT_EQ(scores.size(), 1u);
  ASSERT_EQ(scores[0].size(), 1u);
  EXPECT_GT(scores[0][0], 100.f);
}

TEST(TrainingEngine, GradientScaleIsOneOverReplicasTimesIterSize) {
  auto solver = SolverRegistry<float>::Create(MakeParam("max_iter: 1 iter_size: 2"));
  EXPECT_FLOAT_EQ(solver->optimizer()->gradient_scale(), 0.5f);  // the local engine: one replica
  solver->set_engine(std::make_unique<RecordingEngine>(solver.get(), 4, nullptr));
  EXPECT_FLOAT_EQ(solver->optimizer()->gradient_scale(), 0.125f);
  solver->set_engine(nullptr);  // back to a local engine
  EXPECT_FLOAT_EQ(solver->optimizer()->gradient_scale(), 0.25f * 2);
}

// Plain SGD written only as a rule (no one-pass update), so the update takes the separate passes: a custom
// optimizer, registered as a solver type of its own.
template <typename Dtype>
class PlainSgdOptimizer : public Optimizer<Dtype> {
 public:
  using Optimizer<Dtype>::Optimizer;

 protected:
  const char* rule_type() const override { return "PlainSgd"; }
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override {
    this->net_->learnable_params()[param_id]->scale_diff(rate);
  }
};
REGISTER_OPTIMIZER_CLASS(PlainSgd);

// The update applies the solver's scale, whichever path it takes: with an engine that claims 4 replicas but sums one,
// every weight moves a quarter as far as with the local engine (SGD without momentum or decay, one pass; and the
// same rule in separate passes).
TEST(TrainingEngine, UpdatesUseTheSolversScale) {
  for (bool one_pass : {true, false}) {
    SCOPED_TRACE(one_pass ? "one pass" : "separate passes");
    std::vector<float> moved[2];
    for (int replicas : {1, 4}) {
      const SolverParameter param = MakeParam(one_pass ? "max_iter: 1" : "max_iter: 1 type: 'PlainSgd'");
      std::unique_ptr<Solver<float>> solver = SolverRegistry<float>::Create(param);
      ASSERT_EQ(solver->optimizer()->updates_in_one_pass(), one_pass);
      if (replicas > 1) solver->set_engine(std::make_unique<RecordingEngine>(solver.get(), replicas, nullptr));
      SetInputs(solver->net());
      const std::vector<float> before = AllWeights(*solver);
      solver->Step(1);
      const std::vector<float> after = AllWeights(*solver);
      for (size_t i = 0; i < before.size(); ++i) moved[replicas > 1].push_back(after[i] - before[i]);
    }
    ASSERT_EQ(moved[0].size(), moved[1].size());
    double largest = 0;
    for (size_t i = 0; i < moved[0].size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(moved[0][i])));
      EXPECT_NEAR(moved[1][i], moved[0][i] / 4, 1e-6 + 1e-5 * std::fabs(moved[0][i])) << "weight " << i;
    }
    EXPECT_GT(largest, 1e-3) << "the weights hardly moved: the test would prove nothing";
  }
}

// The optimizer on its own, applied to a net by hand (clear, forward, backward, Apply with the policy's rate),
// moves the weights to the same bits as the loop's Step with its engine, for a one-pass rule, a rule in separate
// passes (Adam with clipping) and iter_size 2, over three iterations.
TEST(Optimizer, AppliedDirectlyEqualsTheLoopsStep) {
  for (const char* extra : {"type: 'SGD' momentum: 0.9 weight_decay: 0.01",
                            "type: 'Adam' momentum: 0.9 momentum2: 0.999 clip_gradients: 0.05",
                            "type: 'Nesterov' momentum: 0.8 iter_size: 2 stepsize: 2 gamma: 0.5"}) {
    SCOPED_TRACE(extra);
    SolverParameter param = MakeParam(std::string("max_iter: 3 ") + extra);
    if (param.stepsize() > 0) param.set_lr_policy("step");  // a rate that changes between the iterations
    auto loop = SolverRegistry<float>::Create(param);
    auto by_hand = SolverRegistry<float>::Create(param);
    SetInputs(loop->net());
    SetInputs(by_hand->net());
    ASSERT_EQ(AllWeights(*loop), AllWeights(*by_hand));
    const std::vector<float> initial = AllWeights(*loop);
    loop->Step(3);
    Net<float>& net = *by_hand->net();
    Optimizer<float>& optimizer = *by_hand->optimizer();
    int step = 0;
    for (int iter = 0; iter < 3; ++iter) {
      optimizer.BeginIteration(iter);
      if (!optimizer.gradients_zeroed()) net.ClearParamDiffs();
      for (int pass = 0; pass < param.iter_size(); ++pass) {
        net.Forward();
        net.Backward();
      }
      optimizer.Apply(LearningRateAt(by_hand->param(), iter, &step), iter);
    }
    EXPECT_EQ(AllWeights(*by_hand), AllWeights(*loop)) << "the optimizer alone differs from the loop's step";
    EXPECT_NE(AllWeights(*loop), initial) << "the weights did not move: the test would prove nothing";
  }
}

// Every history blob a solverstate keeps goes back where it was: Restore gives a new solver the same optimizer
// state, and the next step the same bits.
TEST(Optimizer, StateRoundTripsThroughTheSolverstate) {
  const SolverParameter param = MakeParam("max_iter: 4 type: 'Adam' momentum: 0.9 momentum2: 0.99");
  auto first = SolverRegistry<float>::Create(param);
  SetInputs(first->net());
  first->Step(2);
  SolverState state;
  first->optimizer()->SaveState(&state);
  ASSERT_EQ(state.history_size(), 2 * static_cast<int>(first->net()->learnable_params().size()));
  auto second = SolverRegistry<float>::Create(param);
  SetInputs(second->net());
  second->optimizer()->RestoreState(state, "state");
  for (size_t p = 0; p < first->net()->learnable_params().size(); ++p) {
    second->net()->learnable_params()[p]->CopyFrom(*first->net()->learnable_params()[p]);
  }
  first->optimizer()->Apply(0.5f, 2);  // both apply the same (zero) gradient with Adam's history alone
  second->optimizer()->Apply(0.5f, 2);
  EXPECT_EQ(AllWeights(*first), AllWeights(*second));
  SolverState wrong;
  wrong.add_history();
  try {
    second->optimizer()->RestoreState(wrong, "w.solverstate");
    ADD_FAILURE() << "a solverstate with the wrong number of history blobs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w.solverstate holds 1 history blobs; this Adam solver"), std::string::npos)
        << e.what();
  }
}

// The other parts of a model (a pipeline replica's other stages), faked: every sum adds what they hold.
class OtherParts : public Collectives {
 public:
  explicit OtherParts(double held) : held_(held) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void Allreduce(float* buf, size_t n) override { Add(buf, n); }
  void Allreduce(double* buf, size_t n) override { Add(buf, n); }
  void ReduceScatter(float*, const std::vector<int>&) override { ADD_FAILURE() << "ReduceScatter"; }
  void ReduceScatter(double*, const std::vector<int>&) override { ADD_FAILURE() << "ReduceScatter"; }
  void Allgather(float*, const std::vector<int>&) override { ADD_FAILURE() << "Allgather"; }
  void Allgather(double*, const std::vector<int>&) override { ADD_FAILURE() << "Allgather"; }
  std::vector<std::string> GatherToRoot(const std::string& mine) override { return {mine}; }
  int sums = 0;

 private:
  template <typename T>
  void Add(T* buf, size_t n) {
    ASSERT_EQ(n, 1u);
    buf[0] += static_cast<T>(held_);
    ++sums;
  }
  double held_;
};

// With the model in parts (Optimizer::set_model_parts), clipping bounds the norm of the whole gradient and a
// dynamic loss scale skips the step when any part's gradient is not finite: one sum over the parts each.
TEST(Optimizer, ClippingAndALossScaleSpanTheModelsParts) {
  const auto step = [](const std::string& extra, Collectives* parts) {
    auto solver = SolverRegistry<float>::Create(MakeParam("max_iter: 1 " + extra));
    SetInputs(solver->net());
    solver->optimizer()->set_model_parts(parts);
    const std::vector<float> before = AllWeights(*solver);
    solver->Step(1);
    std::vector<float> moved = AllWeights(*solver);
    for (size_t i = 0; i < moved.size(); ++i) moved[i] -= before[i];
    return std::make_pair(moved, solver->optimizer()->loss_scale());
  };
  // Plain SGD at rate 0.5: the unclipped step is -0.5 x the gradient, so its squares give this part's norm.
  const std::vector<float> free = step("", nullptr).first;
  double own = 0;
  for (float m : free) own += (m / 0.5) * (m / 0.5);
  ASSERT_GT(own, 1e-6);
  // A threshold half this part's norm, the other parts holding 3 times its square: the whole norm is twice this
  // part's, so the step is a quarter of the free one (half, were the other parts left out).
  OtherParts other(3 * own);
  const std::string clip = "clip_gradients: " + std::to_string(0.5 * std::sqrt(own));
  const std::vector<float> clipped = step(clip, &other).first;
  EXPECT_EQ(other.sums, 1);
  for (size_t i = 0; i < free.size(); ++i) {
    EXPECT_NEAR(clipped[i], 0.25f * free[i], 1e-4f * std::fabs(free[i]) + 1e-9f) << "weight " << i;
  }
  // One part not finite (the sum of the parts' flags is 1): every part skips, and its scale is lowered.
  OtherParts overflowed(1), finite(0);
  const auto [skipped, lowered] = step("loss_scale { scale: 1024 dynamic: true }", &overflowed);
  EXPECT_EQ(skipped, std::vector<float>(free.size(), 0.f));
  EXPECT_EQ(lowered, 512);
  const auto [taken, kept] = step("loss_scale { scale: 1024 dynamic: true }", &finite);
  EXPECT_EQ(taken, free);  // a power of two: bit for bit the unscaled step
  EXPECT_EQ(kept, 1024);
  EXPECT_EQ(overflowed.sums + finite.sums, 2);
}

TEST(Optimizer, UnknownTypeIsRefusedWithTheKnownOnes) {
  try {
    SolverRegistry<float>::Create(MakeParam("type: 'Lion'"));
    ADD_FAILURE() << "an unknown solver type was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown solver type 'Lion'"), std::string::npos) << what;
    for (const char* t : {"AdaDelta", "AdaGrad", "Adam", "KFAC", "Nesterov", "RMSProp", "SGD"}) {
      EXPECT_NE(what.find(t), std::string::npos) << t << " missing from: " << what;
    }
  }
}

// MakeEngine's choice on one process (the data-parallel and pipeline choices run under mpirun), and the
// combinations a pipeline cannot run, each refused before a net is built with one message naming both settings.
TEST(MakeEngine, ChoosesTheLocalEngineOnOneProcessAndRefusesWhatAPipelineCannotRun) {
  EXPECT_EQ(ChooseEngine(MakeParam(""), EngineSetup()), EngineKind::kLocal);
  auto solver = SolverRegistry<float>::Create(MakeParam("max_iter: 1"));
  EXPECT_NE(dynamic_cast<LocalEngine<float>*>(solver->engine()), nullptr);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"type: 'KFAC'", "pipeline_param and the K-FAC solver's true Fisher"},
      // The empirical Fisher runs per stage: refused only for want of ranks.
      {"type: 'KFAC' kfac_param { fisher: EMPIRICAL }", "pipeline_param needs the ranks of an MPI job"},
      {"recompute_param { planner: 'sqrt' }", "recompute_param and pipeline_param"},
      {"", "pipeline_param needs the ranks of an MPI job"}};
  for (const auto& [extra, message] : refused) {
    SolverParameter p = MakeParam(extra + " pipeline_param { stages: 2 }");
    try {
      SolverRegistry<float>::Create(p);
      ADD_FAILURE() << extra << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("pipeline"), std::string::npos) << e.what();
    }
  }
}

// Which param is which: the display names of ip1 and ip2's weights and biases.
int ParamId(const Net<float>& net, const std::string& layer, int k) {
  const auto& lp = net.layer_by_name(layer)->blobs();
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    if (net.learnable_params()[p] == lp[k].get()) return static_cast<int>(p);
  }
  ADD_FAILURE() << layer << " param " << k << " is not learnable";
  return -1;
}

TEST(BucketPlan, PacksSmallGradientsInBackwardOrderAndCutsLargeOnes) {
  Net<float> net(MakeParam("").net_param());
  const int ip1 = net.layer_index("ip1"), ip2 = net.layer_index("ip2");
  const int w1 = ParamId(net, "ip1", 0), b1 = ParamId(net, "ip1", 1);
  const int w2 = ParamId(net, "ip2", 0), b2 = ParamId(net, "ip2", 1);
  // Packing below 16 elements, chunks of 10. Backward finishes ip2 (w 12, b 3) first: packed, 15 elements. Then ip1's
  // w (24) alone, in chunks of 10, 10 and 4, and ip1's b (4) in a bucket of its own, the last one.
  BucketPlan plan(net, 16, 10);
  ASSERT_EQ(plan.num_buckets(), 3);
  EXPECT_EQ(plan.bucket(0).params, (std::vector<int>{w2, b2}));
  EXPECT_EQ(plan.bucket(0).elements, 15u);
  EXPECT_TRUE(plan.bucket(0).packed());
  EXPECT_EQ(plan.bucket(1).params, (std::vector<int>{w1}));
  EXPECT_EQ(plan.bucket(2).params, (std::vector<int>{b1}));
  EXPECT_EQ(plan.buckets_after(ip2), (std::vector<int>{0}));
  EXPECT_EQ(plan.buckets_after(ip1), (std::vector<int>{1, 2}));
  EXPECT_TRUE(plan.buckets_after(net.layer_index("loss")).empty());
  // A packed bucket is one chunk; a single gradient is cut.
  ASSERT_EQ(plan.chunks(0).size(), 1u);
  EXPECT_EQ(plan.chunks(0)[0].count, 15u);
  const auto chunks = plan.chunks(1);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[2].offset, 20u);
  EXPECT_EQ(chunks[2].count, 4u);
  // Units and what each forward waits for.
  EXPECT_EQ(plan.unit_of(w2), ip2);
  EXPECT_EQ(plan.unit_of(b1), ip1);
  EXPECT_EQ(plan.params_in_unit(ip1), 2);
  EXPECT_EQ(plan.reads(ip2), (std::vector<int>{w2, b2}));
  EXPECT_TRUE(plan.reads(net.layer_index("in")).empty());

  // No packing: every gradient alone, still in backward order.
  BucketPlan alone(net, 0, 1000);
  ASSERT_EQ(alone.num_buckets(), 4);
  for (int b = 0; b < 4; ++b) EXPECT_FALSE(alone.bucket(b).packed());
  EXPECT_EQ(alone.bucket_of(w2), 0);
  EXPECT_EQ(alone.bucket_of(b1), 3);
}

TEST(BucketPlan, FrozenParamsAreNotReduced) {
  SolverParameter p = MakeParam("");
  LayerParameter* ip1 = p.mutable_net_param()->mutable_layer(1);
  ip1->add_param()->set_lr_mult(0);
  ip1->add_param()->set_lr_mult(0);
  Net<float> net(p.net_param());
  BucketPlan plan(net, 0, 1000);
  EXPECT_EQ(plan.num_buckets(), 2);
  EXPECT_EQ(plan.bucket_of(ParamId(net, "ip1", 0)), -1);
  EXPECT_EQ(plan.params_in_unit(net.layer_index("ip1")), 0);
  EXPECT_TRUE(plan.reads(net.layer_index("ip1")).empty());
}

TEST(Timeline, WritesChromeTraceSpans) {
  testing_data::TempDir dir;
  Timeline timeline;
  const double t0 = timeline.now_us();
  timeline.Record("conv1", "forward", 0, t0);
  timeline.Record("conv1.w", "allreduce", 2, t0);
  timeline.Write(dir / "trace.json");
  const std::string json = testing_data::ReadAll(dir / "trace.json");
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u) << json;
  EXPECT_NE(json.find("\"name\":\"conv1\",\"cat\":\"forward\",\"ph\":\"X\",\"pid\":0,\"tid\":0"), std::string::npos);
  EXPECT_NE(json.find("\"cat\":\"allreduce\",\"ph\":\"X\",\"pid\":0,\"tid\":2"), std::string::npos);
  EXPECT_EQ(json.find(",\n]"), std::string::npos) << "a trailing comma is not JSON";

  Timeline off(false);
  off.Record("conv1", "forward", 0, off.now_us());
  off.Write(dir / "off.json");
  EXPECT_EQ(testing_data::ReadAll(dir / "off.json").find("conv1"), std::string::npos);
}

TEST(DataParallelOptions, GpuHostStagingGetsAThreadPerCoreUnlessTheSolverSays) {
  CommParameter p;
  EXPECT_EQ(DataParallelOptions::FromProto(p).threads, 1);  // CPU training
  const int expected = std::min(DataParallelOptions::kMaxGpuHostThreads, cores_per_local_rank());
  EXPECT_EQ(DataParallelOptions::FromProto(p, /*gpu=*/true).threads, expected);
  p.set_gpu_path(CommParameter::NCCL);
  EXPECT_EQ(DataParallelOptions::FromProto(p, true).threads, 1);  // NCCL's threads only wait on events
  p.set_gpu_path(CommParameter::HOST);
  p.set_threads(3);
  EXPECT_EQ(DataParallelOptions::FromProto(p, true).threads, 3);
  p.set_threads(0);
  EXPECT_THROW(DataParallelOptions::FromProto(p, true), Error);
}

// The low-layer lane takes a thread of its own: with one thread it could not be, so the setting is refused up front.
TEST(DataParallelOptions, TheLowLayerLaneNeedsTwoThreads) {
  CommParameter p;
  p.set_low_layer_lane(true);
  try {
    DataParallelOptions::FromProto(p);
    ADD_FAILURE() << "low_layer_lane with one thread was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("low_layer_lane needs comm_param.threads of at least 2"), std::string::npos)
        << e.what();
  }
  p.set_threads(2);
  EXPECT_TRUE(DataParallelOptions::FromProto(p).low_layer_lane);
}

}  // namespace
}  // namespace strata
