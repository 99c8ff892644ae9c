// PipelineEngine on however many ranks mpirun started (ctest: 1, 2, 3, 4, 5, 7 and 8).
//
// Equivalence (schedule SYNC): S stages x R replicas, k micro-batches of b records each per iteration, must end
// with the weights one rank reaches accumulating the same R x k micro-batches (iter_size R x k, batch b): the Data
// layer gives replica r micro-batch r of every R consecutive ones, and within an iteration the weights do not
// change, so only the order of additions differs (relative 1e-5). Ranks of one stage must hold bit-identical
// weights. Every rank computes the single-rank reference itself.
//
// The net starts with two RevNet blocks on the 2-channel images, then a convolution, two more RevNet blocks and a
// block of the general coupling (4 streams, gamma 0.5), then pooling, two inner products and the loss, so that
// cuts can make stages of Reversible blocks only: at the start (stage 0, which rebuilds its input from its
// output and keeps nothing), in the middle, and before a stage that stores.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "mpi/mpi_test_util.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/engine/make_engine.hpp"
#include "strata/engine/pipeline_engine.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

constexpr int kBatch = 2;
constexpr int kIterations = 4;
constexpr int kRecords = 2000;

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

// Record i: a 2 x 6 x 6 image of hashed pixels (two channels: the first blocks split them in halves).
Datum Record(int i) { return mpi_test::HashedRecord(i, 2); }

std::string NetText(const std::string& source) {
  auto block = [](const std::string& name, const std::string& bottom, const std::string& top, int half) {
    std::ostringstream s;
    s << "layer { name: '" << name << "' type: 'Reversible' bottom: '" << bottom << "' top: '" << top << "'\n"
      << "  reversible_param {\n";
    for (const char* side : {"f", "g"}) {
      s << "    " << side << " { name: '" << name << "_" << side << "_conv' type: 'Convolution' bottom: 'in' top: 't'\n"
        << "        convolution_param { num_output: " << half << " kernel_size: 3 pad: 1\n"
        << "          weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.05 } } }\n"
        << "    " << side << " { name: '" << name << "_" << side << "_relu' type: 'ReLU' bottom: 't' top: 't' }\n";
    }
    s << "  } }\n";
    return s.str();
  };
  std::ostringstream s;
  s << "name: 'pipe'\n"
    << "layer { name: 'data' type: 'Data' top: 'data' top: 'label' transform_param { scale: 0.00390625 }\n"
    << "        data_param { source: '" << source << "' batch_size: " << kBatch << " } }\n"
    << block("b0", "data", "r0", 1) << block("b1", "r0", "r1", 1)
    << "layer { name: 'conv1' type: 'Convolution' bottom: 'r1' top: 'conv1'\n"
    << "        convolution_param { num_output: 4 kernel_size: 3 pad: 1\n"
    << "          weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.1 } } }\n"
    << "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }\n"
    << block("b2", "conv1", "r2", 2) << block("b3", "r2", "r3", 2)
    << "layer { name: 'b4' type: 'Reversible' bottom: 'r3' top: 'r4'\n"
    << "  reversible_param { streams: 4 gamma: 0.5\n";
  for (int t = 0; t < 3; ++t) {
    s << "    step { layer { name: 'b4_s" << t << "' type: 'Convolution' bottom: 'in' top: 't'\n"
      << "                   convolution_param { num_output: 1 kernel_size: 3 pad: 1\n"
      << "                     weight_filler { type: 'gaussian' std: 0.3 } } }\n"
      << "           layer { name: 'b4_s" << t << "_tanh' type: 'TanH' bottom: 't' top: 't' } }\n";
  }
  s << "  } }\n"
    << "layer { name: 'pool' type: 'Pooling' bottom: 'r4' top: 'pool'\n"
    << "        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
    << "layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool' top: 'ip1'\n"
    << "        inner_product_param { num_output: 8\n"
    << "          weight_filler { type: 'gaussian' std: 0.2 } bias_filler { type: 'constant' value: 0.05 } } }\n"
    << "layer { name: 'relu2' type: 'ReLU' bottom: 'ip1' top: 'ip1' }\n"
    << "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'\n"
    << "        inner_product_param { num_output: 5\n"
    << "          weight_filler { type: 'gaussian' std: 0.2 } bias_filler { type: 'constant' value: 0 } } }\n"
    << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }\n";
  return s.str();
}

// A net whose first stage carries state from one forward to the next: the batch of 2 records is 2 steps of one
// sequence (an LSTM without expose_hidden), and every step continues it (cont 1), so each micro-batch starts from
// the state the one before it ended with, as one rank's passes do. Cut at 'ip'.
std::string LstmNetText(const std::string& source) {
  std::ostringstream s;
  s << "name: 'sequence'\n"
    << "layer { name: 'data' type: 'Data' top: 'data' top: 'label' transform_param { scale: 0.00390625 }\n"
    << "        data_param { source: '" << source << "' batch_size: " << kBatch << " } }\n"
    << "layer { name: 'cont' type: 'DummyData' top: 'cont'\n"
    << "        dummy_data_param { shape { dim: " << kBatch << " dim: 1 } data_filler { type: 'constant' value: 1 } } }\n"
    << "layer { name: 'steps' type: 'Reshape' bottom: 'data' top: 'steps'\n"
    << "        reshape_param { shape { dim: " << kBatch << " dim: 1 dim: -1 } } }\n"
    << "layer { name: 'lstm' type: 'LSTM' bottom: 'steps' bottom: 'cont' top: 'h'\n"
    << "        recurrent_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.2 }\n"
    << "          bias_filler { type: 'constant' value: 0.1 } } }\n"
    << "layer { name: 'ip' type: 'InnerProduct' bottom: 'h' top: 'ip'\n"
    << "        inner_product_param { num_output: 5 axis: 2 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
    << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' softmax_param { axis: 2 } }\n";
  return s.str();
}

// Cuts that put Reversible blocks alone in stages (the first, the middle ones) for S stages; empty past 6.
std::vector<std::string> ReversibleCuts(int stages) {
  switch (stages) {
    case 2: return {"conv1"};                              // stage 0: data, b0, b1 (reversible)
    case 3: return {"conv1", "pool"};    // + stage 1: a stem (conv1, relu1) and b2, b3, b4: keeps its input only
    case 4: return {"conv1", "b2", "pool"};  // stage 1 stores and sends its input back; stage 2: b2..b4, keeps nothing
    case 5: return {"b1", "conv1", "b2", "pool"};          // two Reversible stages in a row
    case 6: return {"b1", "conv1", "b2", "b4", "pool"};
    default: return {};
  }
}

using Weights = std::map<std::string, std::vector<std::vector<float>>>;  // layer -> its blobs

Weights WeightsOf(Net<float>& net) {
  Weights w;
  for (int i = 0; i < net.num_layers(); ++i) {
    for (const auto& b : net.layers()[static_cast<size_t>(i)]->blobs()) {
      w[net.layer_names()[static_cast<size_t>(i)]].emplace_back(b->cpu_data(), b->cpu_data() + b->count());
    }
  }
  return w;
}

uint64_t Digest(const Weights& w) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& layer : w) {
    for (const auto& blob : layer.second) {
      for (float v : blob) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
      }
    }
  }
  return h;
}

struct Config {
  int replicas = 1;
  int micro_batches = 3;
  std::vector<std::string> cuts;  // empty: the planner's
  PipelineParameter::Activations activations = PipelineParameter::STORE;
  bool reversible = true;
  PipelineParameter::Schedule schedule = PipelineParameter::SYNC;
  float base_lr = 0.05f;
  bool lstm = false;  // LstmNetText's net
  bool gpu = false;   // GPU training, the reference too
  bool kfac = false;  // K-FAC (empirical Fisher, KL clip), the reference too
  DataParallelOptions reducer;  // how the replicas sum (comm_param): threads, chunks, fusion, lane
  // The largest weight difference from one rank, relative to the blob's largest value: float rounding (the stages
  // sum in another order). On the GPU each process measures and picks its own cuDNN convolution algorithms.
  // K-FAC's inverses and trust region magnify the roundings (the composability matrix's bound).
  float bound() const { return kfac ? 2e-4f : gpu ? 1e-4f : 1e-5f; }
  std::string describe() const {
    std::ostringstream s;
    s << world_size() / replicas << " stages x " << replicas << " replicas, " << micro_batches
      << " micro-batches, cuts";
    if (cuts.empty()) s << " planned";
    for (const auto& c : cuts) s << " " << c;
    s << ", " << PipelineParameter::Activations_Name(activations) << (reversible ? ", reversible stages" : "") << ", "
      << PipelineParameter::Schedule_Name(schedule) << (lstm ? ", the LSTM net" : "") << (gpu ? ", GPU" : "")
      << (kfac ? ", K-FAC" : "");
    if (replicas > 1) {
      s << ", replicas sum on " << reducer.threads << " thread(s) in chunks of " << reducer.chunk_bytes
        << " B, fusion " << reducer.fusion_bytes << " B" << (reducer.low_layer_lane ? ", low-layer lane" : "");
    }
    return s.str();
  }
};

class PipelineEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    saved_minloglevel_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 1;
    // Rank 0 writes the LMDB and tells the others where; they only read it.
    db_ = mpi_test::SharedRecordDb(&dir_, kRecords, Record);
    comm_ = std::make_unique<Communicator>(0);
  }
  static void TearDownTestSuite() {
    comm_.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    dir_.reset();
    FLAGS_minloglevel = saved_minloglevel_;
  }

  // `lstm`: LstmNetText's net instead of NetText's; `kfac`: K-FAC's empirical Fisher with a KL clip (which every
  // stage's blocks share) instead of SGD.
  static SolverParameter MakeSolverParam(int iter_size, int test_iter = 2, bool lstm = false, bool kfac = false) {
    const std::string net = lstm ? LstmNetText(db_) : NetText(db_);
    SolverParameter p;
    ReadProtoFromTextString(net, p.mutable_net_param());
    p.set_type("SGD");
    if (kfac) {
      p.set_type("KFAC");
      KfacParameter* k = p.mutable_kfac_param();
      k->set_fisher(KfacParameter::EMPIRICAL);
      k->set_damping(0.01f);
      k->set_factor_interval(1);
      k->set_inverse_interval(2);
      k->set_kl_clip(0.01f);
    }
    p.set_base_lr(0.05f);
    p.set_momentum(0.9f);
    p.set_weight_decay(0.01f);
    p.set_lr_policy("inv");
    p.set_gamma(0.05f);
    p.set_power(0.75f);
    p.set_max_iter(kIterations);
    p.set_iter_size(iter_size);
    p.set_random_seed(1701);
    // A test net (the same net) that runs only when asked (TestAll below): its scores travel through the stages.
    ReadProtoFromTextString(net, p.add_test_net_param());
    p.add_test_iter(test_iter);
    p.set_test_interval(1000);
    p.set_test_initialization(false);
    p.set_display(0);
    p.set_snapshot_after_train(false);
    return p;
  }

  // Trains under `c`; returns this rank's weights and leaves the engine's stats in stats_.
  Weights Train(const Config& c, std::unique_ptr<Solver<float>>* keep = nullptr) {
    SolverParameter p = MakeSolverParam(c.micro_batches, 2, c.lstm, c.kfac);
    p.set_base_lr(c.base_lr);
    PipelineParameter* pp = p.mutable_pipeline_param();
    pp->set_replicas(static_cast<uint32_t>(c.replicas));
    for (const auto& cut : c.cuts) pp->add_cut(cut);
    pp->set_activations(c.activations);
    pp->set_reversible(c.reversible);
    pp->set_schedule(c.schedule);
    pp->set_plan_passes(1);
    EngineSetup setup;
    setup.comm = comm_.get();
    setup.options = c.reducer;
    Strata::set_solver_rank(world_rank());  // the process's rank, as strata train sets it: rank 0 logs
    Strata::set_solver_count(world_size());
    Strata::set_mode(c.gpu ? Strata::GPU : Strata::CPU);
    auto solver = SolverRegistry<float>::Create(p, setup);
    auto* engine = dynamic_cast<PipelineEngine<float>*>(solver->engine());
    if (!engine) {
      ADD_FAILURE() << "MakeEngine did not choose the pipeline engine for pipeline_param";
      return Weights();
    }
    solver->Solve();
    test_scores_ = solver->TestAll();
    stats_ = engine->stats();
    grid_ = engine->grid();
    reversible_ = engine->reversible();
    rebuilds_input_ = engine->rebuilds_input();
    copies_ = engine->net_copies();
    Weights w = WeightsOf(*solver->net());
    Strata::set_mode(Strata::CPU);
    Strata::set_solver_rank(0);
    Strata::set_solver_count(1);
    if (keep) *keep = std::move(solver);
    return w;
  }

  // One rank accumulating the same micro-batches.
  // With R replicas, each tests its own shard of 2 batches: the reference tests the R x 2 batches.
  static Weights Reference(const Config& c, Weights* initial, std::vector<std::vector<float>>* scores) {
    const int iter_size = c.micro_batches * c.replicas;
    Strata::set_solver_rank(0);
    Strata::set_solver_count(1);
    Strata::set_mode(c.gpu ? Strata::GPU : Strata::CPU);
    auto solver = SolverRegistry<float>::Create(MakeSolverParam(iter_size, 2 * c.replicas, c.lstm, c.kfac));
    *initial = WeightsOf(*solver->net());
    solver->Solve();
    *scores = solver->TestAll();
    Strata::set_mode(Strata::CPU);
    return WeightsOf(*solver->net());
  }

  void Check(const Config& c) {
    SCOPED_TRACE(c.describe());
    Weights initial;
    std::vector<std::vector<float>> reference_scores;
    const Weights reference = Reference(c, &initial, &reference_scores);
    const Weights w = Train(c);
    // The test scores (the loss over 2 test batches) come out of the last stage, which rank 0 holds.
    if (world_rank() == 0) {
      ASSERT_EQ(test_scores_.size(), 1u);
      ASSERT_EQ(test_scores_[0].size(), reference_scores[0].size());
      for (size_t k = 0; k < test_scores_[0].size(); ++k) {
        EXPECT_NEAR(test_scores_[0][k], reference_scores[0][k], 1e-4f * std::fabs(reference_scores[0][k]))
            << "test score " << k;
      }
    }
    bool close = true;
    int compared = 0;
    for (const auto& layer : w) {
      auto ref = reference.find(layer.first);
      if (ref == reference.end()) continue;  // the stage's Input and Split layers
      ASSERT_EQ(layer.second.size(), ref->second.size()) << layer.first;
      for (size_t b = 0; b < layer.second.size(); ++b) {
        const auto& got = layer.second[b];
        const auto& want = ref->second[b];
        const auto& start = initial.at(layer.first)[b];
        ASSERT_EQ(got.size(), want.size());
        float scale = 0, diff = 0, moved = 0;
        for (size_t k = 0; k < got.size(); ++k) {
          scale = std::max(scale, std::fabs(want[k]));
          diff = std::max(diff, std::fabs(got[k] - want[k]));
          moved = std::max(moved, std::fabs(want[k] - start[k]));
        }
        EXPECT_GT(moved, 1e-4f * scale) << layer.first << " blob " << b << " hardly moved: the test proves nothing";
        EXPECT_LE(diff, c.bound() * scale) << layer.first << " blob " << b << ": the pipeline differs from one rank by "
                                         << diff << " (largest value " << scale << ")";
        close = close && diff <= c.bound() * scale;
        ++compared;
      }
    }
    int all_compared = 0;  // a stage may have no weights (pooling alone); the pipeline as a whole has
    MPI_Allreduce(&compared, &all_compared, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_GT(all_compared, 0) << "no stage has weights to compare";
    EXPECT_TRUE(all_ranks(close)) << "some stage's weights differ from the single-rank reference";
    // Replicas of a stage: bit-identical.
    MPI_Comm stage;
    MPI_Comm_split(MPI_COMM_WORLD, grid_.stage, grid_.replica, &stage);
    uint64_t d = Digest(w), lo = 0, hi = 0;
    MPI_Allreduce(&d, &lo, 1, MPI_UINT64_T, MPI_MIN, stage);
    MPI_Allreduce(&d, &hi, 1, MPI_UINT64_T, MPI_MAX, stage);
    MPI_Comm_free(&stage);
    EXPECT_TRUE(all_ranks(lo == hi)) << "the replicas of a stage hold different weights";
  }

  // LstmNetText's net cut after its LSTM, one replica, STORE and RECOMPUTE.
  void CheckLstmStages(bool gpu) {
    Config c;
    c.gpu = gpu;
    c.lstm = true;
    c.cuts = {"ip"};
    c.reversible = false;
    for (auto activations : {PipelineParameter::STORE, PipelineParameter::RECOMPUTE}) {
      c.activations = activations;
      Check(c);
    }
  }

  PipelineStats stats_;
  std::vector<std::vector<float>> test_scores_;
  PipelineGrid grid_;
  bool reversible_ = false;
  bool rebuilds_input_ = false;
  int copies_ = 0;
  static std::unique_ptr<testing_data::TempDir> dir_;
  static std::string db_;
  static std::unique_ptr<Communicator> comm_;
  static int saved_minloglevel_;
};
std::unique_ptr<testing_data::TempDir> PipelineEngineTest::dir_;
std::string PipelineEngineTest::db_;
std::unique_ptr<Communicator> PipelineEngineTest::comm_;
int PipelineEngineTest::saved_minloglevel_ = 0;

TEST_F(PipelineEngineTest, SyncStagesEqualOneRankAccumulatingTheMicroBatches) {
  const int n = world_size();
  if (n > 6) GTEST_SKIP() << "the test net is cut into at most 6 stages by hand";
  Config c;
  c.cuts = ReversibleCuts(n);
  for (auto activations : {PipelineParameter::STORE, PipelineParameter::RECOMPUTE}) {
    for (bool reversible : {true, false}) {
      for (int k : {1, 3}) {
        c.activations = activations;
        c.reversible = reversible;
        c.micro_batches = k;
        Check(c);
        // What each stage kept: nothing but one net for Reversible stages and recomputation; a net per micro-batch
        // in flight otherwise.
        if (reversible_ || activations == PipelineParameter::RECOMPUTE) {
          EXPECT_EQ(copies_, 1);
        } else {
          EXPECT_EQ(copies_, std::min(n - grid_.stage, k));
        }
      }
    }
  }
  // Stage 0 is Reversible at every rank count here (b0, b1 or b0 alone); no other stage before the last is
  // made of other layers only at 2 stages.
  if (n >= 2) {
    c.reversible = true;
    c.activations = PipelineParameter::STORE;
    c.micro_batches = 2;
    Check(c);
    if (grid_.stage == 0) {
      EXPECT_TRUE(reversible_) << "stage 0 holds only Reversible blocks";
    }
    if (grid_.stage == n - 1) {
      EXPECT_FALSE(reversible_) << "the last stage computes the loss";
    }
  }
}

// A stage whose LSTM carries its state between forwards: with a net per micro-batch in flight (STORE) the state
// passes from copy to copy in the micro-batches' order, and a replay (RECOMPUTE) starts from the state its
// micro-batch's forward started from, so the stages equal one rank making the passes in order. One replica: the
// replicas of a stage would each carry their own sequence, as data-parallel ranks do.
TEST_F(PipelineEngineTest, StagesCarryAnLstmStateAsOneRank) {
  if (world_size() != 2) GTEST_SKIP() << "2 stages, one replica";
  CheckLstmStages(false);
}

// The same on the GPU, both ranks sharing the machine's GPU: the stages' boundary blobs travel through host
// memory, and the LSTM's state blobs pass from copy to copy on the device.
TEST_F(PipelineEngineTest, GpuStagesCarryAnLstmStateAsOneRank) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
  if (world_size() != 2) GTEST_SKIP() << "2 stages, one replica";
  CheckLstmStages(true);
}

// Reversible stages on the GPU (their coupling's kernels): the pipeline equals one rank on the GPU.
TEST_F(PipelineEngineTest, GpuReversibleStagesEqualOneRank) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
  if (world_size() < 2 || world_size() > 4) GTEST_SKIP() << "2 to 4 stages";
  Config c;
  c.gpu = true;
  c.cuts = ReversibleCuts(world_size());
  Check(c);
}

TEST_F(PipelineEngineTest, PlannedCutsEqualOneRank) {
  if (world_size() > 8) GTEST_SKIP();
  Config c;  // the planner cuts wherever the measured times say: the result must not depend on where
  Check(c);
  c.kfac = true;  // the planner also measures K-FAC's work per layer on the whole net
  Check(c);
}

TEST_F(PipelineEngineTest, StagesTimesReplicasEqualOneRank) {
  const int n = world_size();
  if (n % 2 != 0 || n < 4) GTEST_SKIP() << "needs an even rank count of at least 4 (stages x 2 replicas)";
  Config c;
  c.replicas = 2;
  c.cuts = ReversibleCuts(n / 2);
  Check(c);
  c.activations = PipelineParameter::RECOMPUTE;
  c.micro_batches = 2;
  Check(c);
  // The replicas' sums through the data-parallel engine's reducer as comm_param can shape it: several threads,
  // chunks (302 B: not a multiple of the element size), packed buckets and the low-layer lane.
  c.reducer.threads = 3;
  c.reducer.chunk_bytes = 302;
  c.reducer.fusion_bytes = 256;
  c.reducer.low_layer_lane = true;
  Check(c);
}

// K-FAC per stage (docs/kfac.md, "In a pipeline"): each stage's blocks, factors from every copy of its net (STORE)
// or from the replayed forward (RECOMPUTE; a Reversible stage's stem), reduced over its replicas, the KL clip over
// every stage (a stage of Reversible blocks alone has no blocks and adds nothing) equal one rank's K-FAC.
TEST_F(PipelineEngineTest, KfacStagesTimesReplicasEqualsOneRank) {
  const int n = world_size();
  if (n < 2 || n > 6) GTEST_SKIP() << "needs 2 to 6 ranks";
  Config c;
  c.kfac = true;
  c.replicas = n % 2 == 0 && n >= 4 ? 2 : 1;
  c.cuts = ReversibleCuts(n / c.replicas);
  Check(c);
  c.activations = PipelineParameter::RECOMPUTE;
  c.micro_batches = 2;
  Check(c);
}

// The replicas' gradients on the GPU reach the reducer through the host staging, as the data-parallel engine's do;
// with SGD and with K-FAC per stage.
TEST_F(PipelineEngineTest, GpuStagesTimesReplicasEqualOneRank) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
  if (world_size() != 4) GTEST_SKIP() << "2 stages x 2 replicas";
  Config c;
  c.gpu = true;
  c.replicas = 2;
  c.cuts = ReversibleCuts(2);
  c.reducer.threads = 2;
  c.reducer.chunk_bytes = 400;
  Check(c);
  c.kfac = true;  // K-FAC per stage: the factors from the stage net's device blobs, the KL clip over both stages
  Check(c);
  c.cuts.clear();  // the planner's cut, from K-FAC's work measured on the device
  Check(c);
}


TEST_F(PipelineEngineTest, AsyncTrainsAndMeasuresTheReconstruction) {
  const int n = world_size();
  if (n < 2 || n > 6) GTEST_SKIP() << "needs 2 to 6 ranks";
  Config c;
  c.cuts = ReversibleCuts(n);
  c.schedule = PipelineParameter::ASYNC;
  c.micro_batches = 2;
  // With a learning rate of 0 the weights never change, so a Reversible stage rebuilds exactly (float rounding):
  // what proves the measurement compares the right things.
  c.base_lr = 0;
  Train(c);
  if (reversible_) {
    EXPECT_LT(stats_.max_reconstruction_error, 1e-5) << "the weights did not change, yet the rebuilt input is off";
  }
  c.base_lr = 0.05f;
  std::unique_ptr<Solver<float>> solver;
  const Weights w = Train(c, &solver);
  bool finite = true;
  for (const auto& layer : w) {
    for (const auto& blob : layer.second) {
      for (float v : blob) finite = finite && std::isfinite(v);
    }
  }
  EXPECT_TRUE(all_ranks(finite));
  // Every micro-batch a stage forwarded was also taken back (Drain at the end of Solve).
  EXPECT_EQ(stats_.iterations, kIterations);
  if (reversible_) {
    // Updates between a micro-batch's forward and its backward: the rebuilt input is off, measurably. (This net
    // and rate move the weights a lot per update: 10-30% here; the RevNet on Fashion-MNIST, docs/benchmarks.md,
    // far less.)
    EXPECT_GT(stats_.max_reconstruction_error, 1e-5);
    EXPECT_TRUE(std::isfinite(stats_.max_reconstruction_error));
  }
}

}  // namespace
}  // namespace strata
