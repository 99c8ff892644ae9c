// Solvers: each type's update against a hand computation, each lr policy, iter_size, weight decay, clipping,
// exact resume, and the errors a bad solver setup gives.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "resume_test_util.hpp"
#include "strata/layer_factory.hpp"
#include "strata/solver.hpp"
#include "strata/solvers/sgd_optimizers.hpp"
#include "strata/util/io.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata {

// loss = 0.5 * sum(x^2) over its bottom; defined here so the solver tests depend on no other test file.
template <typename Dtype>
class SolverTestLossLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit SolverTestLossLayer(const LayerParameter& p) : Layer<Dtype>(p) {
    if (this->layer_param_.loss_weight_size() == 0) this->layer_param_.add_loss_weight(1);
  }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->Reshape(std::vector<int>{}); }
  const char* type() const override { return "SolverTestLoss"; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {
    top[0]->mutable_cpu_data()[0] = Dtype(0.5) * bottom[0]->sumsq_data();
  }
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& pd, const BlobVec& bottom) override {
    cpu_scale(bottom[0]->count(), top[0]->cpu_diff()[0], bottom[0]->cpu_data(), bottom[0]->mutable_cpu_diff());
  }
};
REGISTER_LAYER_CLASS(SolverTestLoss);

namespace {

// y = w . x with x = (1, 2), w initialised to (0.5, 0.25); loss = 0.5 y^2, so dL/dw = y x.
const char* kNet = R"(
name: "tiny"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 1 bias_term: false weight_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "SolverTestLoss" bottom: "y" top: "l" }
)";

SolverParameter MakeSolver(const std::string& extra) {
  SolverParameter p;
  ReadProtoFromTextString(extra, &p);
  ReadProtoFromTextString(kNet, p.mutable_net_param());
  if (!p.has_max_iter()) p.set_max_iter(3);
  p.set_snapshot_after_train(false);
  return p;
}

void SetUpInputs(Solver<double>* s) {
  Net<double>* net = s->net();
  double* x = net->blob_by_name("x")->mutable_cpu_data();
  x[0] = 1;
  x[1] = 2;
  double* w = net->layer_by_name("fc")->blobs()[0]->mutable_cpu_data();
  w[0] = 0.5;
  w[1] = 0.25;
}

std::vector<double> Weights(Solver<double>* s) {
  const Blob<double>& w = *s->net()->layer_by_name("fc")->blobs()[0];
  return {w.cpu_data()[0], w.cpu_data()[1]};
}

// The reference: the same updates written out by hand, iteration by iteration.
struct Reference {
  double w[2] = {0.5, 0.25};
  double x[2] = {1, 2};
  double grad(int i) const { return (w[0] * x[0] + w[1] * x[1]) * x[i]; }
};

TEST(Solver, SGDMomentumWeightDecay) {
  auto solver = SolverRegistry<double>::Create(
      MakeSolver("type: 'SGD' base_lr: 0.1 momentum: 0.9 weight_decay: 0.01 lr_policy: 'fixed'"));
  SetUpInputs(solver.get());
  solver->Step(3);
  Reference r;
  double v[2] = {0, 0};
  for (int it = 0; it < 3; ++it) {
    double g[2] = {r.grad(0) + 0.01 * r.w[0], r.grad(1) + 0.01 * r.w[1]};
    for (int i = 0; i < 2; ++i) {
      v[i] = 0.9 * v[i] + 0.1 * g[i];
      r.w[i] -= v[i];
    }
  }
  auto w = Weights(solver.get());
  EXPECT_GT(std::fabs(w[0] - 0.5), 1e-3) << "the weights did not move";
  EXPECT_NEAR(w[0], r.w[0], 1e-7);  // solver fields are float in the proto
  EXPECT_NEAR(w[1], r.w[1], 1e-7);  // solver fields are float in the proto
  EXPECT_EQ(solver->iter(), 3);
}

TEST(Solver, Nesterov) {
  auto solver = SolverRegistry<double>::Create(MakeSolver("type: 'Nesterov' base_lr: 0.05 momentum: 0.8"));
  SetUpInputs(solver.get());
  solver->Step(3);
  Reference r;
  double v[2] = {0, 0};
  for (int it = 0; it < 3; ++it) {
    double g[2] = {r.grad(0), r.grad(1)};
    for (int i = 0; i < 2; ++i) {
      const double prev = v[i];
      v[i] = 0.8 * v[i] + 0.05 * g[i];
      r.w[i] -= 1.8 * v[i] - 0.8 * prev;
    }
  }
  auto w = Weights(solver.get());
  EXPECT_NEAR(w[0], r.w[0], 1e-7);  // solver fields are float in the proto
  EXPECT_NEAR(w[1], r.w[1], 1e-7);  // solver fields are float in the proto
}

TEST(Solver, Adam) {
  auto solver = SolverRegistry<double>::Create(
      MakeSolver("type: 'Adam' base_lr: 0.01 momentum: 0.9 momentum2: 0.999 delta: 1e-8"));
  SetUpInputs(solver.get());
  solver->Step(3);
  Reference r;
  double m[2] = {0, 0}, s[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    double g[2] = {r.grad(0), r.grad(1)};
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      s[i] = 0.999 * s[i] + 0.001 * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(0.9, t));
      const double shat = s[i] / (1 - std::pow(0.999, t));
      // Caffe's form folds the bias corrections into the rate; equal to the textbook form up to where eps sits.
      r.w[i] -= 0.01 * mhat / (std::sqrt(shat) + 1e-8 / std::sqrt(1 - std::pow(0.999, t)));
    }
  }
  auto w = Weights(solver.get());
  EXPECT_NEAR(w[0], r.w[0], 1e-7);
  EXPECT_NEAR(w[1], r.w[1], 1e-7);
}

// AdaGrad and RMSProp: the step is lr g / (sqrt(h) + delta), with h the sum (AdaGrad) or the moving average
// (RMSProp) of g^2.
TEST(Solver, AdaGradAndRMSProp) {
  for (const bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "RMSProp" : "AdaGrad");
    auto solver = SolverRegistry<double>::Create(MakeSolver(
        rms ? "type: 'RMSProp' base_lr: 0.01 rms_decay: 0.9 delta: 1e-6" : "type: 'AdaGrad' base_lr: 0.1 delta: 1e-6"));
    EXPECT_STREQ(solver->type(), rms ? "RMSProp" : "AdaGrad");
    SetUpInputs(solver.get());
    solver->Step(3);
    Reference r;
    double h[2] = {0, 0};
    for (int it = 0; it < 3; ++it) {
      double g[2] = {r.grad(0), r.grad(1)};
      for (int i = 0; i < 2; ++i) {
        h[i] = rms ? 0.9 * h[i] + 0.1 * g[i] * g[i] : h[i] + g[i] * g[i];
        r.w[i] -= (rms ? 0.01 : 0.1) * g[i] / (std::sqrt(h[i]) + 1e-6);
      }
    }
    auto w = Weights(solver.get());
    EXPECT_GT(std::fabs(w[0] - 0.5), 1e-3) << "the weights did not move";
    EXPECT_NEAR(w[0], r.w[0], 1e-7);  // solver fields are float in the proto
    EXPECT_NEAR(w[1], r.w[1], 1e-7);
  }
}

// AdaDelta (Zeiler 2012, as Caffe runs it): momentum is the decay of both running averages; base_lr scales the
// step (1 in the paper).
TEST(Solver, AdaDelta) {
  auto solver =
      SolverRegistry<double>::Create(MakeSolver("type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 1e-6"));
  SetUpInputs(solver.get());
  solver->Step(3);
  Reference r;
  double h[2] = {0, 0}, d[2] = {0, 0};
  for (int it = 0; it < 3; ++it) {
    double g[2] = {r.grad(0), r.grad(1)};
    for (int i = 0; i < 2; ++i) {
      h[i] = 0.95 * h[i] + 0.05 * g[i] * g[i];
      const double u = std::sqrt((d[i] + 1e-6) / (h[i] + 1e-6)) * g[i];
      d[i] = 0.95 * d[i] + 0.05 * u * u;
      r.w[i] -= u;
    }
  }
  auto w = Weights(solver.get());
  EXPECT_GT(std::fabs(w[0] - 0.5), 1e-4) << "the weights did not move";
  EXPECT_NEAR(w[0], r.w[0], 1e-7);
  EXPECT_NEAR(w[1], r.w[1], 1e-7);
}

// The legacy enum picks the same solvers, and Caffe's restrictions hold with a message naming the solver.
TEST(Solver, AdaptiveSolversByEnumAndTheirRestrictions) {
  EXPECT_STREQ(SolverRegistry<double>::Create(MakeSolver("solver_type: ADAGRAD"))->type(), "AdaGrad");
  EXPECT_STREQ(SolverRegistry<double>::Create(MakeSolver("solver_type: RMSPROP"))->type(), "RMSProp");
  EXPECT_STREQ(SolverRegistry<double>::Create(MakeSolver("solver_type: ADADELTA momentum: 0.9"))->type(), "AdaDelta");
  auto message = [](const std::string& text) {
    try {
      SolverRegistry<double>::Create(MakeSolver(text));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("type: 'AdaGrad' momentum: 0.9").find("momentum cannot be used with AdaGrad"), std::string::npos);
  EXPECT_NE(message("type: 'RMSProp' momentum: 0.9").find("momentum cannot be used with RMSProp"), std::string::npos);
  EXPECT_NE(message("type: 'RMSProp' rms_decay: 1.5").find("rms_decay"), std::string::npos);
  EXPECT_NE(message("type: 'AdaDelta' momentum: 1").find("AdaDelta needs"), std::string::npos);
}

// After the last iteration Caffe runs one more forward and prints "Iteration N, loss = " with that loss taken
// into the smoothed loss (average_loss 1: exactly the final weights' loss).
TEST(Solver, FinalLossLineIncludesTheLastForward) {
  SGDSolver<double> solver(MakeSolver("type: 'SGD' base_lr: 0.1 display: 1 average_loss: 1"));
  SetUpInputs(&solver);
  solver.Solve();
  double loss = 0;
  solver.net()->Forward(&loss);
  EXPECT_NEAR(solver.smoothed_loss(), loss, 1e-12 * loss);  // the running mean adds and subtracts
  // The loss of the last iteration (weights after 2 of the 3 updates) differs, so the test tells them apart.
  SGDSolver<double> shorter(MakeSolver("type: 'SGD' base_lr: 0.1 display: 1 average_loss: 1 max_iter: 2"));
  SetUpInputs(&shorter);
  shorter.Solve();
  double last_iteration_loss = 0;
  shorter.net()->Forward(&last_iteration_loss);
  EXPECT_GT(std::fabs(loss - last_iteration_loss), 1e-6);
}

TEST(Solver, L1RegularizationAndLrMult) {
  SolverParameter p = MakeSolver("base_lr: 0.1 weight_decay: 0.5 regularization_type: 'L1'");
  p.mutable_net_param()->mutable_layer(1)->add_param()->set_lr_mult(2);
  auto solver = SolverRegistry<double>::Create(p);
  SetUpInputs(solver.get());
  solver->Step(1);
  Reference r;
  const double g0 = r.grad(0) + 0.5 * 1, g1 = r.grad(1) + 0.5 * 1;
  auto w = Weights(solver.get());
  EXPECT_NEAR(w[0], 0.5 - 0.2 * g0, 1e-7);  // solver fields are float in the proto
  EXPECT_NEAR(w[1], 0.25 - 0.2 * g1, 1e-7);  // solver fields are float in the proto
}

TEST(Solver, IterSizeAveragesGradients) {
  auto one = SolverRegistry<double>::Create(MakeSolver("base_lr: 0.1"));
  auto two = SolverRegistry<double>::Create(MakeSolver("base_lr: 0.1 iter_size: 2"));
  SetUpInputs(one.get());
  SetUpInputs(two.get());
  one->Step(2);
  two->Step(2);
  // The same input twice: the average equals one pass.
  EXPECT_NEAR(Weights(one.get())[0], Weights(two.get())[0], 1e-7);  // solver fields are float in the proto
}

TEST(Solver, ClipGradients) {
  auto solver = SolverRegistry<double>::Create(MakeSolver("base_lr: 1 clip_gradients: 0.1"));
  SetUpInputs(solver.get());
  solver->Step(1);
  Reference r;
  const double g0 = r.grad(0), g1 = r.grad(1);
  const double norm = std::sqrt(g0 * g0 + g1 * g1);
  ASSERT_GT(norm, 0.1);
  auto w = Weights(solver.get());
  EXPECT_NEAR(w[0], 0.5 - g0 * 0.1 / norm, 1e-7);  // solver fields are float in the proto
  EXPECT_NEAR(w[1], 0.25 - g1 * 0.1 / norm, 1e-7);  // solver fields are float in the proto
}

// The one-pass CPU update (Optimizer::UpdateSlice) against the same rule updating in Caffe's separate passes
// (normalise, regularise, ComputeUpdateValue, Blob::Update), over several iterations of a net with a bias,
// lr_mult, decay_mult and iter_size 2, for every rule and both regularisations.
template <template <typename> class O>
class SeparatePasses : public O<double> {
 public:
  using O<double>::O;
  bool rule_has_one_pass() const override { return false; }
};

const char* kWideNet = R"(
name: "wide"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 3 dim: 37 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y"
        param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        inner_product_param { num_output: 11 weight_filler { type: "gaussian" std: 0.3 }
                              bias_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SolverTestLoss" bottom: "y" top: "l" }
)";

template <template <typename> class O>
void ExpectOnePassEqualsSeparatePasses(const std::string& extra) {
  SolverParameter p;
  ReadProtoFromTextString("base_lr: 0.05 lr_policy: 'fixed' iter_size: 2 random_seed: 7 " + extra, &p);
  ReadProtoFromTextString(kWideNet, p.mutable_net_param());
  Strata::set_random_seed(7);
  Net<double> a_net(TrainNetParam(p));
  Strata::set_random_seed(7);
  Net<double> b_net(TrainNetParam(p));
  O<double> one_pass(p, &a_net);
  SeparatePasses<O> separate(p, &b_net);
  ASSERT_TRUE(one_pass.updates_in_one_pass());
  ASSERT_FALSE(separate.updates_in_one_pass());
  for (Net<double>* net : {&a_net, &b_net}) {
    double* x = net->blob_by_name("x")->mutable_cpu_data();
    for (int i = 0; i < 3 * 37; ++i) x[i] = std::sin(0.7 * i);
  }
  const auto& a = a_net.learnable_params();
  const auto& b = b_net.learnable_params();
  ASSERT_EQ(a.size(), 2u);
  const std::vector<double> initial(a[0]->cpu_data(), a[0]->cpu_data() + a[0]->count());
  ASSERT_EQ(initial, std::vector<double>(b[0]->cpu_data(), b[0]->cpu_data() + b[0]->count()));
  for (int iter = 0; iter < 4; ++iter) {
    for (std::pair<Net<double>*, Optimizer<double>*> s : {std::pair<Net<double>*, Optimizer<double>*>{&a_net, &one_pass},
                                                          {&b_net, &separate}}) {
      if (!s.second->gradients_zeroed()) s.first->ClearParamDiffs();
      for (int pass = 0; pass < 2; ++pass) {
        s.first->Forward();
        s.first->Backward();
      }
      s.second->Apply(0.05, iter);
    }
  }
  double moved = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    for (int i = 0; i < a[k]->count(); ++i) {
      EXPECT_NEAR(a[k]->cpu_data()[i], b[k]->cpu_data()[i], 1e-12 * (1 + std::fabs(b[k]->cpu_data()[i])))
          << extra << " param " << k << " element " << i;
      EXPECT_EQ(a[k]->cpu_diff()[i], 0) << "the one-pass update leaves the gradient at zero";
      if (k == 0) moved = std::max(moved, std::fabs(a[k]->cpu_data()[i] - initial[i]));
    }
  }
  EXPECT_GT(moved, 1e-4) << extra << ": the weights did not move";
}

TEST(Solver, OnePassUpdateEqualsSeparatePasses) {
  ExpectOnePassEqualsSeparatePasses<SGDOptimizer>("momentum: 0.9 weight_decay: 0.01");
  ExpectOnePassEqualsSeparatePasses<SGDOptimizer>("momentum: 0.9 weight_decay: 0.02 regularization_type: 'L1'");
  ExpectOnePassEqualsSeparatePasses<NesterovOptimizer>("momentum: 0.8 weight_decay: 0.01");
  ExpectOnePassEqualsSeparatePasses<AdamOptimizer>("momentum: 0.9 momentum2: 0.999 delta: 1e-8 weight_decay: 0.01");
  ExpectOnePassEqualsSeparatePasses<AdaGradOptimizer>("delta: 1e-6 weight_decay: 0.01");
  ExpectOnePassEqualsSeparatePasses<RMSPropOptimizer>(
      "rms_decay: 0.9 delta: 1e-6 weight_decay: 0.02 regularization_type: 'L1'");
  ExpectOnePassEqualsSeparatePasses<AdaDeltaOptimizer>("momentum: 0.9 delta: 1e-6 weight_decay: 0.01");
}

// Slices in any order and any cut give the same bits as one slice over the whole parameter: what lets the
// data-parallel engine update each chunk as soon as its allreduce is done.
TEST(Solver, UpdateSliceIsElementwise) {
  SolverParameter p;
  ReadProtoFromTextString("type: 'Adam' base_lr: 0.05 lr_policy: 'fixed' weight_decay: 0.01 random_seed: 3", &p);
  ReadProtoFromTextString(kWideNet, p.mutable_net_param());
  auto whole = SolverRegistry<double>::Create(p);
  auto sliced = SolverRegistry<double>::Create(p);
  for (Solver<double>* s : {whole.get(), sliced.get()}) {
    double* x = s->net()->blob_by_name("x")->mutable_cpu_data();
    for (int i = 0; i < 3 * 37; ++i) x[i] = std::cos(0.3 * i);
  }
  for (int iter = 0; iter < 3; ++iter) {
    for (Solver<double>* s : {whole.get(), sliced.get()}) {
      s->net()->ClearParamDiffs();
      s->net()->Forward();
      s->net()->Backward();
    }
    Blob<double>* w = whole->net()->learnable_params()[0];
    const size_t n = static_cast<size_t>(w->count());
    whole->optimizer()->UpdateSlice(0, 0, n, 0.05, iter, 0.5);
    sliced->optimizer()->UpdateSlice(0, 200, n, 0.05, iter, 0.5);
    sliced->optimizer()->UpdateSlice(0, 0, 1, 0.05, iter, 0.5);
    sliced->optimizer()->UpdateSlice(0, 1, 200, 0.05, iter, 0.5);
    const Blob<double>* v = sliced->net()->learnable_params()[0];
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(w->cpu_data()[i], v->cpu_data()[i]) << "iteration " << iter << " element " << i;
  }
  EXPECT_NE(whole->net()->learnable_params()[0]->cpu_data()[5], 0);
}

TEST(LrPolicy, EveryPolicyByHand) {
  SolverParameter p;
  p.set_base_lr(0.1f);
  p.set_gamma(0.5f);
  p.set_power(2);
  p.set_stepsize(10);
  p.set_max_iter(100);
  int step = 0;
  p.set_lr_policy("fixed");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 37, &step), 0.1f);
  p.set_lr_policy("step");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 25, &step), 0.1f * 0.25f);
  p.set_lr_policy("exp");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 3, &step), 0.1f * 0.125f);
  p.set_lr_policy("inv");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 2, &step), 0.1f / 4.f);  // (1 + 0.5*2)^-2
  p.set_lr_policy("poly");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 50, &step), 0.1f * 0.25f);  // (1 - 0.5)^2
  p.set_lr_policy("sigmoid");
  EXPECT_FLOAT_EQ(LearningRateAt(p, 10, &step), 0.05f);  // 1 / (1 + e^0)
  p.set_lr_policy("multistep");
  p.add_stepvalue(5);
  p.add_stepvalue(8);
  step = 0;
  EXPECT_FLOAT_EQ(LearningRateAt(p, 4, &step), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(p, 5, &step), 0.05f);
  EXPECT_FLOAT_EQ(LearningRateAt(p, 9, &step), 0.025f);
  EXPECT_EQ(step, 2);
  p.set_lr_policy("cosine-ish");
  EXPECT_THROW(LearningRateAt(p, 1, &step), Error);
}

class SolverFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strata_solver_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

// Training 0..6 in one go equals 0..3, snapshot, then resume to 6 — bit for bit, dropout included, for a solver
// with one history blob per parameter and for ones with two (AdaDelta, Adam) or none that momentum touches, with
// snapshots in either of Caffe's formats.
TEST_F(SolverFiles, ResumeIsExact) {
  const char* net = R"(
name: "resume"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "fc2" type: "InnerProduct" bottom: "h" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SolverTestLoss" bottom: "y" top: "l" }
)";
  for (const auto format : {SolverParameter::BINARYPROTO, SolverParameter::HDF5})
  for (const std::string type : {"SGD", "RMSProp", "AdaDelta", "Adam"}) {
    SCOPED_TRACE(type + (format == SolverParameter::HDF5 ? " HDF5" : " BINARYPROTO"));
    const std::string prefix = dir_ + "/" + type + (format == SolverParameter::HDF5 ? "_h5" : "");
    auto make = [&](int max_iter) {
      SolverParameter p;
      p.set_type(type);
      ReadProtoFromTextString(net, p.mutable_net_param());
      p.set_base_lr(0.05f);
      p.set_momentum(type == "RMSProp" ? 0.f : 0.9f);
      p.set_weight_decay(0.01f);
      p.set_lr_policy("inv");
      p.set_gamma(0.1f);
      p.set_power(0.75f);
      p.set_max_iter(max_iter);
      p.set_random_seed(7);
      p.set_snapshot_prefix(prefix);
      p.set_snapshot_format(format);
      auto s = SolverRegistry<float>::Create(p);
      float* x = s->net()->blob_by_name("x")->mutable_cpu_data();
      for (int i = 0; i < 12; ++i) x[i] = 0.1f * (i - 5);
      return s;
    };
    auto straight = make(6);
    straight->Solve();
    auto first = make(3);
    first->Solve();  // snapshots at the end: TYPE_iter_3.*
    auto resumed = make(6);
    resumed->Solve(prefix + "_iter_3" + SolverstateExtension(format));
    EXPECT_EQ(resumed->iter(), 6);
    const auto& a = straight->net()->learnable_params();
    const auto& b = resumed->net()->learnable_params();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      for (int k = 0; k < a[i]->count(); ++k) ASSERT_EQ(a[i]->cpu_data()[k], b[i]->cpu_data()[k]) << i << "," << k;
    }
  }
}

// The same with data: a Data layer (random crop and mirror on and off), Dropout and a test net.
TEST(SolverResume, DataDropoutAndTestNetResumeExactly) {
  testing_data::TempDir dir;
  resume_test::WriteDb(dir / "db");
  for (bool random_transforms : {false, true}) {
    SCOPED_TRACE(random_transforms ? "random crop and mirror" : "no random transforms");
    resume_test::Compare(dir / "db", dir.path(), random_transforms, DataShard(), [](Solver<float>*) {}, [] {});
  }
}

// A solverstate written before data positions, transform seeds and per-rank engines were recorded still
// loads (with warnings), and one whose data layers do not match the net is an error.
TEST(SolverResume, OlderSolverstateLoadsAndMismatchIsAnError) {
  testing_data::TempDir dir;
  resume_test::WriteDb(dir / "db");
  auto solver = SolverRegistry<float>::Create(resume_test::Param(dir / "db", true, 3, dir / "old"));
  solver->Step(2);
  solver->Snapshot();
  const std::string file = dir / "old_iter_2.solverstate";
  SolverState state;
  ReadProtoFromBinaryFile(file, &state);
  EXPECT_EQ(state.data_position_size(), 2);  // the train net's Data layer and the test net's
  EXPECT_EQ(state.data_seed_size(), 2);
  EXPECT_EQ(state.rank_rng_state_size(), 1);
  SolverState old = state;
  old.clear_checksum();  // an edited file has the old checksum no more
  old.clear_data_position();
  old.clear_data_seed();
  old.clear_rank_rng_state();
  WriteProtoToBinaryFile(old, dir / "older.solverstate");
  EXPECT_NO_THROW(solver->Restore(dir / "older.solverstate"));
  EXPECT_EQ(solver->iter(), 2);
  SolverState extra = state;
  extra.clear_checksum();
  extra.add_data_position(0);
  WriteProtoToBinaryFile(extra, dir / "extra.solverstate");
  testing_data::ExpectErrorContaining([&] { solver->Restore(dir / "extra.solverstate"); },
                                      {"3 data layer position(s)", "2 data layer(s)"});
}

TEST_F(SolverFiles, NaNLossStopsAndKeepsEarlierSnapshot) {
  SolverParameter p = MakeSolver("base_lr: 1e30 snapshot: 1");
  p.set_snapshot_prefix(dir_ + "/nan");
  p.set_max_iter(10);
  auto solver = SolverRegistry<double>::Create(p);
  SetUpInputs(solver.get());
  try {
    solver->Solve();
    FAIL() << "expected the NaN loss to stop training";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at iteration"), std::string::npos) << e.what();
  }
  // The snapshot written before the blow-up is intact and loadable.
  NetParameter weights;
  EXPECT_NO_THROW(ReadNetParamsFromBinaryFile(dir_ + "/nan_iter_1.caffemodel", &weights));
  SolverState state;
  EXPECT_NO_THROW(ReadProtoFromBinaryFile(dir_ + "/nan_iter_1.solverstate", &state));
}

// A process killed inside a snapshot's write leaves its NAME.tmp.PID (WriteFileAtomically); the next run with the
// same prefix removes such files before it trains (their process is gone), and leaves every other file alone.
TEST_F(SolverFiles, StaleSnapshotTemporariesAreRemovedBeforeTraining) {
  SolverParameter p = MakeSolver("base_lr: 0.1 max_iter: 1");
  p.set_snapshot_prefix(dir_ + "/run");
  p.set_snapshot_after_train(true);
  const pid_t gone = fork();  // a process that has ended: its pid names no process now
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  const std::string dead = std::to_string(gone);
  const std::vector<std::string> stale = {"run_iter_100.caffemodel.tmp." + dead, "run_iter_100.solverstate.tmp." + dead};
  const std::vector<std::string> kept = {"run_iter_50.caffemodel", "other_iter_100.caffemodel.tmp.4242", "notes.tmp.1"};
  for (const auto& f : stale) std::ofstream(dir_ + "/" + f) << "half a snapshot";
  for (const auto& f : kept) std::ofstream(dir_ + "/" + f) << "not ours";
  auto solver = SolverRegistry<double>::Create(p);
  solver->Solve();
  for (const auto& f : stale) EXPECT_FALSE(FileExists(dir_ + "/" + f)) << f << " was left behind";
  for (const auto& f : kept) EXPECT_TRUE(FileExists(dir_ + "/" + f)) << f << " was removed";
  EXPECT_TRUE(FileExists(dir_ + "/run_iter_1.caffemodel"));
}

TEST_F(SolverFiles, CorruptFilesAreErrors) {
  SolverParameter p = MakeSolver("base_lr: 0.1");
  p.set_snapshot_prefix(dir_ + "/c");
  auto solver = SolverRegistry<double>::Create(p);
  solver->Snapshot();
  const std::string state = dir_ + "/c_iter_0.solverstate";
  const std::string model = dir_ + "/c_iter_0.caffemodel";
  // Truncated copies.
  for (const std::string& f : {state, model}) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 4u);
    std::ofstream(f + ".cut", std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  }
  EXPECT_THROW(solver->Restore(state + ".cut"), Error);
  EXPECT_THROW(solver->net()->CopyTrainedLayersFrom(model + ".cut"), Error);
  std::ofstream(dir_ + "/garbage.solverstate") << "this is not a protobuf \xff\xff\xff";
  EXPECT_THROW(solver->Restore(dir_ + "/garbage.solverstate"), Error);
  EXPECT_THROW(solver->Restore(dir_ + "/missing.solverstate"), Error);
  // A solverstate for a different solver type (Adam keeps twice the history).
  auto adam = SolverRegistry<double>::Create(MakeSolver("type: 'Adam' base_lr: 0.1"));
  EXPECT_THROW(adam->Restore(state), Error);
}

TEST_F(SolverFiles, SolverWithoutNetIsAnError) {
  std::ofstream(dir_ + "/s.prototxt") << "base_lr: 0.1\nmax_iter: 10\n";
  EXPECT_THROW(ReadSolverParam(dir_ + "/s.prototxt"), Error);
  std::ofstream(dir_ + "/t.prototxt") << "net: 'x.prototxt'\nregularization_type: 'L3'\n";
  EXPECT_THROW(ReadSolverParam(dir_ + "/t.prototxt"), Error);
  SolverParameter unknown = MakeSolver("type: 'Momentum9000' base_lr: 0.1");
  EXPECT_THROW(SolverRegistry<double>::Create(unknown), Error);
}

}  // namespace
}  // namespace strata
