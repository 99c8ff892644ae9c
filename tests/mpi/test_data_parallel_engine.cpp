// DataParallelEngine on however many ranks mpirun started (ctest: 1, 2, 3, 4, 5, 7 and 8).
//
// Equivalence: N ranks with batch b each, trained k iterations through the data-parallel engine, must end with the
// weights one rank reaches with batch N*b (SGD with momentum and weight decay). The Data layer gives rank r
// records [s + r*b, s + (r+1)*b) of every global batch starting at s, so the N shards together are exactly
// the single rank's batch, and the mean of N per-rank mean gradients is the mean over the global batch.
// Only the order of the additions differs, so the weights agree to float rounding (relative 1e-5), not bit
// for bit. Every rank computes that single-rank reference itself (no communication), once per solver
// setting. Across ranks, on the other hand, the weights must be bit-identical: the allreduce gives every
// rank the same sum and every rank applies the same update to it.
//
// The net is tiny (conv + ReLU + inner product + ReLU + inner product + SoftmaxWithLoss on 6x6 images), so a
// configuration takes milliseconds of compute; chunk_bytes 64 cuts every weight blob into several chunks, so
// what is tested is the chunk bookkeeping, the per-layer updates, overtaking and fusion, with each
// allreduce algorithm.
//
// Checks are EXPECTs evaluated after every collective; a rank that fails still joins every later
// collective, so a failure never turns into a hang.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "data_test_util.hpp"
#include "mpi/mpi_test_util.hpp"
#include "resume_test_util.hpp"
#include "strata/comm/allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/device.hpp"
#include "strata/engine/consistency.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/make_engine.hpp"
#include "strata/memory_format.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

constexpr int kBatchPerRank = 3;
constexpr int kIterations = 20;
constexpr int kRecords = 1000;  // more than 8 ranks x 3 x 20 iterations x iter_size 2: no wrap-around

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;
using mpi_test::same_on_all_ranks;

// Record i: a 1 x 6 x 6 image of hashed pixels (mpi_test::HashedRecord).
Datum Record(int i) { return mpi_test::HashedRecord(i, 1); }

std::string NetText(const std::string& source, int batch, bool batch_norm, int conv_outputs = 3) {
  std::ostringstream s;
  s << "name: 'sync'\n"
    << "layer { name: 'data' type: 'Data' top: 'data' top: 'label' transform_param { scale: 0.00390625 }\n"
    << "        data_param { source: '" << source << "' batch_size: " << batch << " } }\n"
    << "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
    << "        convolution_param { num_output: " << conv_outputs << " kernel_size: 3\n"
    << "          weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.1 } } }\n";
  std::string below = "conv1";
  if (batch_norm) {
    s << "layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'bn1'\n"
      << "        param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 } }\n";
    below = "bn1";
  }
  s << "layer { name: 'relu1' type: 'ReLU' bottom: '" << below << "' top: '" << below << "' }\n"
    << "layer { name: 'ip1' type: 'InnerProduct' bottom: '" << below << "' top: 'ip1'\n"
    << "        inner_product_param { num_output: 8\n"
    << "          weight_filler { type: 'gaussian' std: 0.2 } bias_filler { type: 'constant' value: 0.05 } } }\n"
    << "layer { name: 'relu2' type: 'ReLU' bottom: 'ip1' top: 'ip1' }\n"
    << "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'\n"
    << "        param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
    << "        inner_product_param { num_output: 5\n"
    << "          weight_filler { type: 'gaussian' std: 0.2 } bias_filler { type: 'constant' value: 0 } } }\n"
    << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }\n";
  return s.str();
}

// What the solver does; the single-rank reference depends on these and not on the engine options.
struct SolverSetting {
  int iter_size = 1;
  float clip = -1;  // clip_gradients; < 0: off
  // K-FAC instead of SGD: 0 no, 1 each layer inverted by its owner rank, 2 every layer by every rank.
  int kfac = 0;
  bool gpu = false;  // GPU training (the reference too)
  // conv1's outputs: 16 has oneDNN keep its weights in a blocked layout of its own (memory_format.hpp), which the
  // allreduce then sums as it is.
  int conv_outputs = 3;
  bool loss_scale = false;  // a dynamic loss scale from 2^12, doubled every 2 iterations
  bool operator<(const SolverSetting& o) const {
    return std::tie(iter_size, clip, kfac, gpu, conv_outputs, loss_scale) <
           std::tie(o.iter_size, o.clip, o.kfac, o.gpu, o.conv_outputs, o.loss_scale);
  }
};

struct Config {
  std::string algorithm = "hybrid";
  bool overlap = true;
  size_t chunk_bytes = 64;  // 16 floats: ip1's 384 weights are 24 chunks, conv1's 27 are 2
  size_t fusion_bytes = 0;
  int threads = 1;  // see FusionThreadsAndChunkSizes for more
  bool low_layer_lane = false;
  int checksum_interval = 0;
  int poll_sleep_us = 0;
  bool staged = false;  // CPU training through the GPU path's HOST staging (plain copies)
  bool plain_on_rank1 = false;  // rank 1 keeps its parameters plain, as a CPU of another kind might
  CommParameter::GpuPath gpu_path = CommParameter::HOST;
  SolverSetting solver;
  std::string describe() const {
    std::ostringstream s;
    s << algorithm << ", overlap " << (overlap ? "on" : "off") << ", chunks " << chunk_bytes << " B, fusion "
      << fusion_bytes << " B, " << threads << " thread(s), poll sleep " << poll_sleep_us << " us, iter_size "
      << solver.iter_size << ", clip " << solver.clip << ", K-FAC " << solver.kfac
      << (solver.gpu ? std::string(", GPU, ") + CommParameter::GpuPath_Name(gpu_path) : "")
      << (staged ? ", HOST staging in CPU training" : "") << ", conv1 outputs " << solver.conv_outputs
      << (plain_on_rank1 ? ", rank 1's parameters plain" : "") << (solver.loss_scale ? ", a loss scale" : "");
    return s.str();
  }
};

using Weights = std::vector<std::vector<float>>;

Weights WeightsOf(Solver<float>& solver) {
  Weights w;
  for (Blob<float>* p : solver.net()->learnable_params()) w.emplace_back(p->cpu_data(), p->cpu_data() + p->count());
  return w;
}

class DataParallelEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The tests build many solvers; their INFO lines on 8 ranks would bury a failure.
    saved_minloglevel_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 1;
    // Rank 0 writes the LMDB and tells the others where; they only read it.
    db_ = mpi_test::SharedRecordDb(&dir_, kRecords, Record);
    // Three communication threads at most; every configuration uses a prefix of them.
    comm_ = std::make_unique<Communicator>(3);
  }
  static void TearDownTestSuite() {
    comm_.reset();
    MPI_Barrier(MPI_COMM_WORLD);  // nobody still reads the LMDB
    dir_.reset();
    references_.clear();
    FLAGS_minloglevel = saved_minloglevel_;
  }

  // y = w x (x: 1 x 2, w starting at 0.5) under a Euclidean loss against t, trained by every rank with
  // `solver_text`'s settings: the tests of values that are not finite on one rank set x and t themselves.
  static std::unique_ptr<Solver<float>> MakeOneWeightSolver(const std::string& solver_text) {
    Strata::set_solver_rank(world_rank());
    Strata::set_solver_count(world_size());
    SolverParameter param;
    ReadProtoFromTextString(solver_text, &param);
    ReadProtoFromTextString(R"(
      name: "huge"
      layer { name: "in" type: "Input" top: "x" top: "t" input_param { shape { dim: 1 dim: 2 } shape { dim: 1 dim: 1 } } }
      layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y"
              inner_product_param { num_output: 1 bias_term: false weight_filler { type: "constant" value: 0.5 } } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "l" })",
                            param.mutable_net_param());
    EngineSetup setup;
    setup.comm = comm_.get();
    return SolverRegistry<float>::Create(param, setup);
  }

  // Two iterations that every rank skips, each halving the loss scale from `scale`; returns the weights they kept.
  static Weights ExpectTwoSkippedIterations(Solver<float>* solver, double scale) {
    const Weights start = WeightsOf(*solver);
    for (int k = 1; k <= 2; ++k) {
      solver->Step(1);
      solver->engine()->Drain();
      EXPECT_TRUE(all_ranks(WeightsOf(*solver) == start)) << "iteration " << k << " was not skipped on every rank";
      EXPECT_TRUE(all_ranks(solver->optimizer()->skipped_iterations() == k));
      EXPECT_TRUE(all_ranks(solver->optimizer()->loss_scale() == scale / (1 << k)));
    }
    return start;
  }

  static SolverParameter MakeSolverParam(int batch, const SolverSetting& s, bool batch_norm = false) {
    SolverParameter p;
    ReadProtoFromTextString(NetText(db_, batch, batch_norm, s.conv_outputs), p.mutable_net_param());
    p.set_type("SGD");
    p.set_base_lr(0.1f);
    p.set_momentum(0.9f);
    p.set_weight_decay(0.01f);
    p.set_lr_policy("inv");  // a rate that changes every iteration: updates must use their own iteration's
    p.set_gamma(0.05f);
    p.set_power(0.75f);
    p.set_max_iter(kIterations);
    p.set_iter_size(s.iter_size);
    if (s.clip >= 0) p.set_clip_gradients(s.clip);
    if (s.kfac) {
      // Empirical Fisher: the true Fisher's sampled labels differ with the batch split. Factors every second
      // iteration and inverses every third, so the schedules are exercised; a KL clip that bites.
      p.set_type("KFAC");
      KfacParameter* k = p.mutable_kfac_param();
      k->set_fisher(KfacParameter::EMPIRICAL);
      k->set_damping(0.01f);
      k->set_factor_interval(2);
      k->set_inverse_interval(3);
      k->set_kl_clip(0.01f);
      k->set_distribute_inverses(s.kfac == 1);
    }
    if (s.loss_scale) {
      LossScaleParameter* l = p.mutable_loss_scale();
      l->set_scale(4096);
      l->set_dynamic(true);
      l->set_growth_interval(2);
    }
    p.set_random_seed(1701);
    p.set_display(0);
    p.set_snapshot_after_train(false);
    return p;
  }

  // One rank, batch N*b, the local engine: what N ranks together must reproduce.
  static const Weights& Reference(const SolverSetting& s) {
    auto it = references_.find(s);
    if (it != references_.end()) return it->second;
    Strata::set_solver_rank(0);
    Strata::set_solver_count(1);
    Strata::set_mode(s.gpu ? Strata::GPU : Strata::CPU);
    auto solver = SolverRegistry<float>::Create(MakeSolverParam(kBatchPerRank * world_size(), s));
    initial_ = WeightsOf(*solver);
    solver->Solve();
    Strata::set_mode(Strata::CPU);
    return references_[s] = WeightsOf(*solver);
  }

  static DataParallelOptions OptionsOf(const Config& c) {
    DataParallelOptions o;
    o.overlap = c.overlap;
    o.chunk_bytes = c.chunk_bytes;
    o.fusion_bytes = c.fusion_bytes;
    o.threads = c.threads;
    o.low_layer_lane = c.low_layer_lane;
    o.checksum_interval = c.checksum_interval;
    o.poll_sleep_us = c.poll_sleep_us;
    o.stage_in_cpu_mode = c.staged;
    o.gpu_path = c.gpu_path;
    return o;
  }

  // A solver whose nets read this rank's share of the data, for a data-parallel engine the test installs.
  static std::unique_ptr<Solver<float>> RankSolver(const SolverParameter& p) {
    EngineSetup setup;
    setup.data_shard = {world_rank(), world_size()};
    return SolverRegistry<float>::Create(p, setup);
  }

  // Installs the data-parallel engine with `o` in `solver`.
  static DataParallelEngine<float>* Install(Solver<float>* solver, const DataParallelOptions& o,
                                            const std::string& algorithm = "hybrid") {
    auto engine = std::make_unique<DataParallelEngine<float>>(solver->net(), solver->optimizer(), solver->param(),
                                                              *comm_, AllreducePolicy::from_name(algorithm), o);
    return static_cast<DataParallelEngine<float>*>(solver->set_engine(std::move(engine)));
  }

  // Trains with the data-parallel engine under `c` and checks the weights against the reference and across ranks; their
  // digest is left in digest_, and whether conv1's weights ended in a layer's CustomFormat in conv1_laid_out_.
  void Check(const Config& c, float tolerance = 1e-5f) {
    SCOPED_TRACE(c.describe());
    const Weights& reference = Reference(c.solver);
    Strata::set_solver_rank(world_rank());
    Strata::set_solver_count(world_size());
    Strata::set_mode(c.solver.gpu ? Strata::GPU : Strata::CPU);
    const bool layouts_before = param_layouts_enabled();
    if (c.plain_on_rank1 && world_rank() == 1) set_param_layouts_enabled(false);
    auto solver = RankSolver(MakeSolverParam(kBatchPerRank, c.solver));
    uint64_t digest = 0;
    Weights w;
    {
      DataParallelEngine<float>* engine = Install(solver.get(), OptionsOf(c), c.algorithm);
      solver->Solve();  // drains at the end
      // The gradient's layout: the end of training reads the values plain (the weights' digest).
      conv1_laid_out_ = solver->net()->learnable_params()[0]->diff()->layout() == MemoryFormat::kCustom;
      set_param_layouts_enabled(layouts_before);
      digest = engine->WeightsDigest();
      lane_buckets_ = engine->reducer().lane_buckets();
      w = WeightsOf(*solver);
      solver->set_engine(nullptr);
    }
    Strata::set_mode(Strata::CPU);
    Strata::set_solver_rank(0);
    Strata::set_solver_count(1);
    EXPECT_EQ(solver->iter(), kIterations);

    // Relative to each blob's largest reference value; the weights must also have moved well beyond that.
    bool close = w.size() == reference.size();
    for (size_t i = 0; close && i < w.size(); ++i) {
      ASSERT_EQ(w[i].size(), reference[i].size());
      float scale = 0, diff = 0, moved = 0;
      for (size_t k = 0; k < w[i].size(); ++k) {
        scale = std::max(scale, std::fabs(reference[i][k]));
        diff = std::max(diff, std::fabs(w[i][k] - reference[i][k]));
        moved = std::max(moved, std::fabs(reference[i][k] - initial_[i][k]));
      }
      EXPECT_GT(moved, 1e-3f * scale) << "param " << i << " hardly moved: the test would prove nothing";
      EXPECT_LT(diff, tolerance * scale) << "param " << i << ": N ranks differ from one rank with batch N*b by "
                                         << diff << " (largest value " << scale << ")";
      close = close && diff < tolerance * scale;
    }
    EXPECT_TRUE(all_ranks(close)) << "some rank's weights differ from the single-rank reference";
    EXPECT_TRUE(same_on_all_ranks(digest)) << "the ranks' weights are not bit-identical";
    digest_ = digest;
  }

  // `c` with overlap on and off, each without fusion and with the biases and conv1's weights fused.
  void CheckOverlapAndFusion(Config c) {
    for (size_t fusion : {size_t(0), size_t(256)}) {
      for (bool overlap : {true, false}) {
        c.fusion_bytes = fusion;
        c.overlap = overlap;
        Check(c);
      }
    }
  }

  uint64_t digest_ = 0;
  int lane_buckets_ = 0;  // the buckets the last Check's reducer dealt to the low-layer lane
  bool conv1_laid_out_ = false;
  static std::unique_ptr<testing_data::TempDir> dir_;
  static std::string db_;
  static std::unique_ptr<Communicator> comm_;
  static std::map<SolverSetting, Weights> references_;
  static Weights initial_;
  static int saved_minloglevel_;
};
std::unique_ptr<testing_data::TempDir> DataParallelEngineTest::dir_;
std::string DataParallelEngineTest::db_;
std::unique_ptr<Communicator> DataParallelEngineTest::comm_;
std::map<SolverSetting, Weights> DataParallelEngineTest::references_;
Weights DataParallelEngineTest::initial_;
int DataParallelEngineTest::saved_minloglevel_ = 0;

TEST_F(DataParallelEngineTest, EveryAlgorithmOverlappedAndChunkedEqualsOneRankWithTheWholeBatch) {
  std::vector<std::string> algorithms = allreduce_algorithm_names();
  algorithms.push_back("hybrid");
  for (const auto& name : algorithms) {
    Config c;
    c.algorithm = name;
    Check(c);
  }
}

// conv1 with 16 outputs: oneDNN computes its weight gradient in a blocked layout, and the convolution keeps its
// weights and gradient in it (memory_format.hpp, CustomFormat); the threads sum and update the chunks as they are.
// The ranks agree on the layout, so it stays; N ranks still equal one rank with the whole batch, with and without
// overlap and fusion. Where one rank keeps its parameters plain (a CPU of another kind would choose another
// layout), every rank finds it out after the first forward and goes on plain, with the same result.
TEST_F(DataParallelEngineTest, WeightsInOneDnnLayoutsEqualOneRankWithTheWholeBatch) {
  Config c;
  c.solver.conv_outputs = 16;
  CheckOverlapAndFusion(c);
  EXPECT_TRUE(conv1_laid_out_) << "conv1's weights stayed plain: the test would prove nothing";
  c.fusion_bytes = 0;
  c.plain_on_rank1 = true;
  Check(c);
  EXPECT_EQ(conv1_laid_out_, world_size() == 1);
  EXPECT_TRUE(param_layouts_enabled());
}

TEST_F(DataParallelEngineTest, OverlapOffEqualsOneRankWithTheWholeBatch) {
  for (const auto& name : {"hybrid", "ring_seg", "brd"}) {
    Config c;
    c.algorithm = name;
    c.overlap = false;
    Check(c);
  }
}

TEST_F(DataParallelEngineTest, FusionThreadsAndChunkSizes) {
  Config c;
  c.fusion_bytes = 256;  // the biases and conv1's weights fuse; ip1's weights stay alone, in chunks
  Check(c);
  c.overlap = false;
  Check(c);
  c.overlap = true;
  c.fusion_bytes = 4096;  // everything but ip1's weights in one bucket
  c.chunk_bytes = 4 << 20;
  Check(c);
  // Several threads, chunks dealt round-robin: the collectives on each thread's communicator must still
  // match across ranks. (Few chunks: concurrent collectives are slow under Open MPI, see threads in
  // docs/benchmarks.md.)
  c = Config();
  c.threads = 2;
  c.chunk_bytes = 400;
  Check(c);
  c.threads = 3;
  c.chunk_bytes = 302;  // not a multiple of the element size
  c.checksum_interval = 1;  // the per-iteration consistency check must pass (and drains every iteration)
  Check(c);
  // Sleeping between polls instead of blocking in MPI: every exchange pattern (linear's, the segmented
  // pipelines, the fold of non-power-of-two rank counts) through the polling wait.
  for (const auto& name : {"linear", "vhd_seg", "ring_seg", "brb"}) {
    c = Config();
    c.algorithm = name;
    c.poll_sleep_us = 20;
    Check(c);
  }
}

// The low-layer lane deals the lowest layers' chunks (here conv1's) to thread 0 and the rest round-robin to the
// others: the collectives must still match across ranks, and each chunk is summed by the same algorithm as with
// round-robin dealing, so the weights are the same bit for bit.
TEST_F(DataParallelEngineTest, TheLowLayerLaneGivesRoundRobinsWeightsBitForBit) {
  Config c;
  c.threads = 3;
  c.chunk_bytes = 302;
  for (const size_t fusion : {size_t{0}, size_t{256}}) {
    c.fusion_bytes = fusion;
    c.low_layer_lane = false;
    Check(c);
    const uint64_t round_robin = digest_;
    EXPECT_EQ(lane_buckets_, 0);
    c.low_layer_lane = true;
    Check(c);
    EXPECT_GT(lane_buckets_, 0) << c.describe() << ": no bucket on the lane, so the test would prove nothing";
    EXPECT_TRUE(all_ranks(round_robin == digest_)) << c.describe() << ": the lane's weights differ from round-robin's";
  }
  c = Config();
  c.threads = 2;  // one lane and one thread for the rest
  c.low_layer_lane = true;
  c.solver.clip = 0.5f;
  Check(c);
}

TEST_F(DataParallelEngineTest, IterSizeAndClippingEqualOneRankWithTheWholeBatch) {
  Config c;
  c.solver.iter_size = 2;  // only the last pass's gradients are reduced
  Check(c);
  c.overlap = false;
  Check(c);
  c = Config();
  c.solver.clip = 0.5f;  // the norm of the reduced gradient; the updates wait for every reduction
  Check(c);
}

// K-FAC: the factors are means over the batch too, reduced to each layer's owner (or to every rank); the owner's
// preconditioned gradients reach every rank by an allgather. The inverses amplify the factors' float rounding by
// up to their condition number, hence a looser bound than SGD's.
TEST_F(DataParallelEngineTest, KfacEqualsOneRankWithTheWholeBatch) {
  Config c;
  c.solver.kfac = 1;
  Check(c, 1e-4f);
  c.overlap = false;
  Check(c, 1e-4f);
  c.solver.kfac = 2;
  Check(c, 1e-4f);
  // The loss scale divides out of the factors and of the gathered rows of dy as it does out of the gradient.
  c.solver.loss_scale = true;
  Check(c, 1e-4f);
  c.solver.kfac = 1;
  Check(c, 1e-4f);
}

// The GPU path's bookkeeping, in CPU training: through the HOST staging with plain copies in place of the device
// copies, the ranks must end with exactly the CPU path's weights (the same chunks reduced with the same sums and
// scaling), with overlap on and off, fused buckets, chunks dealt to several threads, iter_size and clipping.
TEST_F(DataParallelEngineTest, HostStagingInCpuTrainingGivesTheCpuPathsWeightsBitForBit) {
  std::vector<Config> configs(8);
  configs[1].overlap = false;
  configs[2].fusion_bytes = 256;
  configs[3].fusion_bytes = 256;
  configs[3].overlap = false;
  configs[4].threads = 3;
  configs[4].chunk_bytes = 302;
  configs[5].fusion_bytes = 4096;
  configs[5].chunk_bytes = 4 << 20;
  configs[6].solver.iter_size = 2;
  configs[7].solver.clip = 0.5f;
  for (Config c : configs) {
    Check(c);
    const uint64_t plain = digest_;
    c.staged = true;
    Check(c);
    EXPECT_TRUE(all_ranks(plain == digest_)) << c.describe() << ": the staged path's weights differ from the CPU path's";
  }
}

// MakeEngine's choice under mpirun: a solver built with the job's communicator runs on the data-parallel engine
// when there are several ranks (the local one on one rank), and trains as the engine installed by hand does.
TEST_F(DataParallelEngineTest, MakeEngineChoosesTheDataParallelEngineOnSeveralRanks) {
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(world_size());
  const SolverParameter param = MakeSolverParam(kBatchPerRank, SolverSetting());
  EngineSetup setup;
  setup.comm = comm_.get();
  auto chosen = SolverRegistry<float>::Create(param, setup);
  auto* engine = dynamic_cast<DataParallelEngine<float>*>(chosen->engine());
  EXPECT_EQ(engine != nullptr, world_size() > 1);
  EXPECT_EQ(ChooseEngine(param, setup), world_size() > 1 ? EngineKind::kDataParallel : EngineKind::kLocal);
  chosen->Step(3);
  chosen->engine()->Drain();
  const Weights chosen_weights = WeightsOf(*chosen);
  chosen->set_engine(nullptr);  // its threads stop before another engine uses the same communicators
  auto by_hand = RankSolver(param);
  if (world_size() > 1) Install(by_hand.get(), DataParallelOptions());
  const Weights start = WeightsOf(*by_hand);
  by_hand->Step(3);
  by_hand->engine()->Drain();
  EXPECT_EQ(chosen_weights, WeightsOf(*by_hand));
  EXPECT_NE(chosen_weights, start) << "the weights did not move: the test would prove nothing";
  by_hand->set_engine(nullptr);
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// A dynamic loss scale with one rank's gradient infinite (its input is huge; the others' are not): the reduced
// gradient is infinite on every rank, so every rank skips the same iterations and lowers its scale alike, and the
// first finite one moves every rank's weights the same way.
TEST_F(DataParallelEngineTest, ANonFiniteGradientOnOneRankSkipsTheIterationOnEvery) {
  // y = 0.5 x0: the last rank's weight gradient is 5e29 times the scale, infinite in float from 2^30 on.
  auto solver = MakeOneWeightSolver("base_lr: 1e-31 lr_policy: 'fixed' momentum: 0.9 max_iter: 10 random_seed: 5 "
                                    "snapshot_after_train: false loss_scale { scale: 2147483648 dynamic: true }");
  float* x = solver->net()->blob_by_name("x")->mutable_cpu_data();
  x[0] = world_rank() == world_size() - 1 ? 1e15f : 1.f;
  x[1] = 0;
  solver->net()->blob_by_name("t")->mutable_cpu_data()[0] = 0;
  const Weights start = ExpectTwoSkippedIterations(solver.get(), std::ldexp(1.0, 31));
  solver->Step(1);  // at 2^29 the sum is finite
  solver->engine()->Drain();
  EXPECT_TRUE(all_ranks(WeightsOf(*solver) != start)) << "the first finite iteration did not update";
  EXPECT_TRUE(same_on_all_ranks(WeightsDigest(*solver->net())));
  solver->set_engine(nullptr);
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// K-FAC's factors infinite on one rank only (its input is 2e19, whose square is not a float; its gradient is 0):
// a block's owner alone sees the reduced factor, so the ranks agree on a flag, skip the iteration alike and lower
// the scale alike, and the next finite iteration moves every rank's weights the same way.
TEST_F(DataParallelEngineTest, NonFiniteFactorsOnOneRankSkipTheIterationOnEvery) {
  auto solver = MakeOneWeightSolver("type: 'KFAC' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 max_iter: 10 "
                                    "random_seed: 5 snapshot_after_train: false loss_scale { scale: 64 dynamic: true } "
                                    "kfac_param { fisher: EMPIRICAL damping: 0.01 distribute_inverses: true }");
  const auto set_input = [&](bool huge) {
    float* x = solver->net()->blob_by_name("x")->mutable_cpu_data();
    x[0] = huge ? 2e19f : 1.f + 0.25f * world_rank();
    x[1] = 0.5f;
    solver->net()->blob_by_name("t")->mutable_cpu_data()[0] = 0.5f * x[0];  // the huge rank's y - t rounds to 0
  };
  set_input(world_rank() == world_size() - 1);
  const Weights start = ExpectTwoSkippedIterations(solver.get(), 64);
  set_input(false);
  solver->net()->blob_by_name("t")->mutable_cpu_data()[0] = 0.3f;
  solver->Step(1);
  solver->engine()->Drain();
  EXPECT_TRUE(all_ranks(WeightsOf(*solver) != start)) << "the first finite iteration did not update";
  EXPECT_TRUE(same_on_all_ranks(WeightsDigest(*solver->net())));
  solver->set_engine(nullptr);
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

TEST_F(DataParallelEngineTest, NcclInCpuTrainingIsOneClearError) {
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(world_size());
  auto solver = RankSolver(MakeSolverParam(kBatchPerRank, SolverSetting()));
  Config c;
  c.gpu_path = CommParameter::NCCL;
  try {
    Install(solver.get(), OptionsOf(c));
    ADD_FAILURE() << "gpu_path NCCL was accepted in CPU training";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_path NCCL applies to GPU training"), std::string::npos) << e.what();
  }
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// GPU training, N ranks sharing the machine's GPU(s) (batch b each) against one rank on the GPU with batch N*b:
// the HOST staging (copy streams, events, pinned buffers, updates on the GPU) with overlap on and off, fused
// buckets, several threads, and clipping (the whole reduced gradient, updated on the main thread).
TEST_F(DataParallelEngineTest, GpuHostStagingEqualsOneRankWithTheWholeBatch) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
  Config c;
  c.solver.gpu = true;
  CheckOverlapAndFusion(c);
  c.fusion_bytes = 4096;
  c.chunk_bytes = 4 << 20;
  c.threads = 2;
  Check(c);
  c = Config();
  c.solver.gpu = true;
  c.threads = 3;
  c.chunk_bytes = 302;
  Check(c);
  c = Config();
  c.solver.gpu = true;
  c.solver.clip = 0.5f;
  Check(c);
}

// The NCCL path needs a GPU per rank (tests/mpi/test_gradient_staging.cpp checks the error when ranks share one).
TEST_F(DataParallelEngineTest, GpuNcclEqualsOneRankWithTheWholeBatch) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
#ifndef STRATA_HAVE_NCCL
  GTEST_SKIP() << "this build has no NCCL (CMake found no nccl.h and libnccl)";
#else
  if (gpu_device_count() < world_size()) {
    GTEST_SKIP() << "NCCL needs a GPU per rank: " << world_size() << " ranks, " << gpu_device_count() << " GPU(s)";
  }
  Config c;
  c.solver.gpu = true;
  c.gpu_path = CommParameter::NCCL;
  CheckOverlapAndFusion(c);
#endif
}

// BatchNorm's running statistics are each rank's own (forward writes them), so Drain averages them: after
// it every rank holds the mean of the ranks' statistics, bit for bit the same on every rank.
TEST_F(DataParallelEngineTest, DrainAveragesBatchNormStatistics) {
  const int n = world_size();
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(n);
  auto solver = RankSolver(MakeSolverParam(kBatchPerRank, SolverSetting(), true));
  DataParallelOptions o;
  o.chunk_bytes = 64;
  DataParallelEngine<float>& engine = *Install(solver.get(), o);
  solver->Step(5);  // no drain at the end, unlike Solve
  Net<float>& net = *solver->net();
  std::vector<int> stats;
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    if (net.learnable_param_is_statistic(static_cast<int>(p))) stats.push_back(static_cast<int>(p));
  }
  ASSERT_EQ(stats.size(), 3u);  // mean, variance, scale factor
  std::vector<float> mine;
  for (int p : stats) {
    const Blob<float>& b = *net.learnable_params()[p];
    mine.insert(mine.end(), b.cpu_data(), b.cpu_data() + b.count());
  }
  std::vector<float> all(mine.size() * n);
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(), static_cast<int>(mine.size()),
                MPI_FLOAT, MPI_COMM_WORLD);
  bool differ = false;
  for (int r = 1; r < n; ++r) {
    for (size_t i = 0; i < mine.size(); ++i) differ = differ || all[r * mine.size() + i] != all[i];
  }
  if (n > 1) {
    EXPECT_TRUE(differ) << "the ranks' statistics were equal before Drain: the test proves nothing";
  }

  engine.Drain();
  size_t at = 0;
  bool ok = true;
  for (int p : stats) {
    const Blob<float>& b = *net.learnable_params()[p];
    for (int k = 0; k < b.count(); ++k, ++at) {
      double mean = 0;
      for (int r = 0; r < n; ++r) mean += all[r * mine.size() + at];
      mean /= n;
      const bool near = std::fabs(b.cpu_data()[k] - mean) <= 1e-6 * std::max(1.0, std::fabs(mean));
      EXPECT_TRUE(near) << "statistic " << p << "[" << k << "] = " << b.cpu_data()[k] << ", mean over ranks "
                        << mean;
      ok = ok && near;
    }
  }
  EXPECT_TRUE(all_ranks(ok));
  EXPECT_TRUE(same_on_all_ranks(engine.WeightsDigest())) << "statistics or weights differ across ranks after Drain";
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// A signal reaches one rank only (the last): every rank must still snapshot, and stop, at the same iteration,
// two iterations after the request. Alone, the rank would snapshot on its own (Drain's statistics allreduce
// would wait for the others forever) and stop on its own (the others would wait in the next gradient's).
TEST_F(DataParallelEngineTest, SignalsSnapshotAndStopEveryRankAtTheSameIteration) {
  const int n = world_size();
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(n);
  SolverParameter p = MakeSolverParam(kBatchPerRank, SolverSetting(), true);
  const std::string dir = db_.substr(0, db_.rfind('/'));
  p.set_snapshot_prefix(dir + "/signal");
  auto solver = RankSolver(p);
  DataParallelOptions o;
  o.chunk_bytes = 64;
  DataParallelEngine<float>& engine = *Install(solver.get(), o);
  Solver<float>* s = solver.get();
  const bool signalled = world_rank() == n - 1;
  solver->SetActionFunction([s, signalled] {
    if (signalled && s->iter() == 4) return SignalAction::kSnapshot;
    if (signalled && s->iter() == 9) return SignalAction::kStop;
    return SignalAction::kNone;
  });
  solver->Solve();
  const int lag = n > 1 ? 2 : 0;  // one rank needs no agreement
  EXPECT_EQ(solver->iter(), 9 + lag) << "the stop was not taken two iterations after the request";
  EXPECT_TRUE(same_on_all_ranks(static_cast<uint64_t>(solver->iter()))) << "the ranks stopped at different iterations";
  if (world_rank() == 0) {
    const std::string snapshot = dir + "/signal_iter_" + std::to_string(4 + lag) + ".solverstate";
    EXPECT_TRUE(FileExists(snapshot)) << snapshot << " was not written";
  }
  EXPECT_TRUE(same_on_all_ranks(engine.WeightsDigest()));
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// A stop that reaches one rank only (the last) inside an iteration of many micro-batches ends every rank after the
// same micro-batch, not at the iteration's end: each rank asks the others between its micro-batches. The iteration
// is dropped everywhere (no update), so the weights are the one full iteration's before it.
TEST_F(DataParallelEngineTest, AStopReachingOneRankEndsEveryRankWithinOneMicroBatch) {
  const int n = world_size();
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(n);
  SolverSetting setting;
  setting.iter_size = 64;
  SolverParameter p = MakeSolverParam(kBatchPerRank, setting);
  p.set_max_iter(4);
  DataParallelOptions o;
  o.chunk_bytes = 64;
  auto stopped = RankSolver(p);
  DataParallelEngine<float>& engine = *Install(stopped.get(), o);
  Solver<float>* s = stopped.get();
  const bool signalled = world_rank() == n - 1;
  int polls = 0;  // in iteration 1: at its start, then after each micro-batch
  stopped->SetActionFunction([s, signalled, &polls] {
    if (s->iter() == 1) ++polls;
    return signalled && polls == 4 ? SignalAction::kStop : SignalAction::kNone;
  });
  stopped->Solve();
  EXPECT_EQ(stopped->iter(), 1);
  EXPECT_EQ(polls, 4) << "this rank did not stop after the micro-batch the signalled rank stopped after";
  const uint64_t digest = engine.WeightsDigest();
  EXPECT_TRUE(same_on_all_ranks(digest));
  stopped.reset();

  p.set_max_iter(1);
  auto whole = RankSolver(p);
  DataParallelEngine<float>& reference = *Install(whole.get(), o);
  whole->Solve();
  EXPECT_EQ(digest, reference.WeightsDigest()) << "the dropped iteration changed the weights";
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
}

// Resuming from a snapshot on N ranks repeats the uninterrupted N-rank run bit for bit (resume_test_util.hpp):
// the data positions and transform seeds, and every rank's random engine, gathered to rank 0's solverstate.
TEST_F(DataParallelEngineTest, ResumeFromSnapshotIsExact) {
  std::string dir(256, '\0');
  std::unique_ptr<testing_data::TempDir> temp;
  if (world_rank() == 0) {
    temp = std::make_unique<testing_data::TempDir>();
    resume_test::WriteDb(*temp / "db");
    dir = temp->path();
    dir.resize(256, '\0');
  }
  MPI_Bcast(&dir[0], 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = dir.c_str();
  Strata::set_solver_rank(world_rank());
  Strata::set_solver_count(world_size());
  DataParallelOptions o;
  o.chunk_bytes = 64;
  for (bool random_transforms : {false, true}) {
    SCOPED_TRACE(random_transforms ? "random crop and mirror" : "no random transforms");
    resume_test::Compare(
        dir + "/db", dir, random_transforms, {world_rank(), world_size()}, [&](Solver<float>* s) { Install(s, o); },
        [] { MPI_Barrier(MPI_COMM_WORLD); });
  }
  Strata::set_solver_rank(0);
  Strata::set_solver_count(1);
  MPI_Barrier(MPI_COMM_WORLD);  // nobody still reads the LMDB when rank 0 removes it
}

}  // namespace
}  // namespace strata
