// The composability matrix's multi-rank cells (docs/architecture.md, "Composability"; the one-process cells and
// the net are in tests/test_composability.cpp and tests/composability_test_util.hpp), on however many ranks
// mpirun started. A cell is one line of kCells: an engine (data-parallel with overlap and small chunks, or a
// pipeline of 2 stages x N/2 replicas, SYNC or ASYNC) with a feature. The reference is one rank running the
// same feature over the whole batch (the data-parallel engine: batch N x b; the pipeline, and bfloat16 on either
// engine: the R x k passes of b accumulated with iter_size), computed by every rank itself. A cell equals it within its bound, or is refused
// before the first iteration with one message naming both, or (kTrains: the ranks draw their own random numbers,
// or ASYNC's stale weights) trains with every replica holding the same weights bit for bit.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composability_test_util.hpp"
#include "data_test_util.hpp"
#include "mpi/mpi_test_util.hpp"
#include "resume_test_util.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/pipeline_engine.hpp"
#include "strata/solver.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata {
namespace {

using namespace composability_test;
using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

constexpr int kPerRank = 2;       // records per rank per pass
constexpr int kMicroBatches = 2;  // the pipeline's micro-batches per iteration

uint64_t Digest(const std::vector<std::vector<float>>& w) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& blob : w) {
    for (float v : blob) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h = (h ^ bits) * 1099511628211ull;
    }
  }
  return h;
}

class ComposabilityRanks : public ::testing::TestWithParam<Cell> {
 protected:
  static void SetUpTestSuite() {
    saved_minloglevel_ = FLAGS_minloglevel;
    FLAGS_minloglevel = 1;
    db_ = mpi_test::SharedRecordDb(&dir_, 97, resume_test::Record);
    own_dir_ = std::make_unique<testing_data::TempDir>();
    comm_ = std::make_unique<Communicator>(1);
  }
  static void TearDownTestSuite() {
    comm_.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    dir_.reset();
    own_dir_.reset();
    FLAGS_minloglevel = saved_minloglevel_;
  }

  // The one place training is made and run (the solver API may change: adapt here). `f.engine` picks the engine;
  // kOneRank runs the whole batch alone (the reference). With `resume`, half the iterations, a snapshot (rank 0
  // writes), and new solvers (another seed) restored from it; `edit_state`, if given, runs on rank 0 with the
  // solverstate's file name before they read it.
  static Result Train(const Features& f, int iterations = kIterations,
                      const std::function<void(const std::string&)>& edit_state = nullptr) {
    Switches switches(f);
    const bool one = f.engine == Features::kOneRank;
    Strata::set_solver_rank(one ? 0 : world_rank());
    Strata::set_solver_count(one ? 1 : world_size());
    // Several ranks snapshot where rank 0 writes (beside the shared records); one rank alone in its own folder.
    const std::string prefix = one ? own_dir_->path() + "/run" : db_.substr(0, db_.rfind('/')) + "/run";
    auto make = [&](int seed) {
      SolverParameter p = SolverParam(db_, prefix, f, iterations);
      p.set_random_seed(seed);
      // MakeEngine's choice, as strata train makes it: the pipeline with pipeline_param, else data-parallel over
      // the ranks; one rank alone runs locally.
      EngineSetup setup;
      if (!one) setup.comm = comm_.get();
      setup.options.chunk_bytes = 64;  // every weight blob in several chunks
      if (f.engine == Features::kPipelineSync || f.engine == Features::kPipelineAsync) {
        PipelineParameter* pp = p.mutable_pipeline_param();
        pp->set_replicas(static_cast<uint32_t>(world_size() / 2));
        pp->add_cut("conv2");
        pp->set_schedule(f.engine == Features::kPipelineSync ? PipelineParameter::SYNC : PipelineParameter::ASYNC);
      }
      return SolverRegistry<float>::Create(p, setup);
    };
    Result r;
    std::unique_ptr<Solver<float>> solver;
    try {
      solver = make(1701);
      auto step = [&](int until) {
        while (solver->iter() < until) {
          solver->Step(1);
          r.losses.push_back(solver->smoothed_loss());
        }
      };
      if (f.resume) {
        step(iterations / 2);
        solver->Snapshot();
        solver->set_engine(nullptr);
        solver.reset();
        const std::string state = prefix + "_iter_" + std::to_string(iterations / 2) + ".solverstate";
        if (edit_state && (one || world_rank() == 0)) edit_state(state);
        if (!one) MPI_Barrier(MPI_COMM_WORLD);
        solver = make(4242);
        solver->Restore(state);
      }
      step(iterations);
      if (solver->engine()) solver->engine()->Drain();
    } catch (...) {
      if (solver) solver->set_engine(nullptr);
      Strata::set_solver_rank(0);
      Strata::set_solver_count(1);
      throw;
    }
    r.TakeWeights(*solver->net());
    r.loss_scale = solver->optimizer()->loss_scale();
    solver->set_engine(nullptr);
    Strata::set_solver_rank(0);
    Strata::set_solver_count(1);
    return r;
  }

  static std::unique_ptr<testing_data::TempDir> dir_, own_dir_;
  static std::string db_;
  static std::unique_ptr<Communicator> comm_;
  static int saved_minloglevel_;
};
std::unique_ptr<testing_data::TempDir> ComposabilityRanks::dir_, ComposabilityRanks::own_dir_;
std::string ComposabilityRanks::db_;
std::unique_ptr<Communicator> ComposabilityRanks::comm_;
int ComposabilityRanks::saved_minloglevel_ = 0;

constexpr double kRounding = 2e-4;
const char* const kPerRankDraws = "each rank draws its own random numbers: one rank over the whole batch draws others";
const Cell kCells[] = {
    {"data_parallel", "fusion", kRounding},
    {"data_parallel", "layouts", kRounding},
    {"data_parallel", "bf16", kRounding},
    {"data_parallel", "recompute", kRounding},
    {"data_parallel", "free_after_use", kRounding},
    {"data_parallel", "reversible", kRounding},
    {"data_parallel", "kfac_empirical", kRounding},
    {"data_parallel", "kfac_true", 0, kTrains, kPerRankDraws},
    {"data_parallel", "iter_size", kRounding},
    {"data_parallel", "clip", kRounding},
    {"data_parallel", "resume", kRounding},
    {"data_parallel", "dropout", 0, kTrains, kPerRankDraws},
    {"data_parallel", "stochastic_pool", 0, kTrains, kPerRankDraws},
    // A dynamic loss scale makes the engine reduce the whole gradient before one update (it may skip the step).
    {"data_parallel", "loss_scale", kRounding},
    {"pipeline_sync", "fusion", kRounding},
    {"pipeline_sync", "layouts", kRounding},
    {"pipeline_sync", "bf16", kRounding},
    {"pipeline_sync", "recompute", 0, kRefused, "recompute_param|pipeline_param"},
    {"pipeline_sync", "free_after_use", 0, kRefused, "blob_lifetime|pipeline_param"},
    {"pipeline_sync", "reversible", kRounding},
    {"pipeline_sync", "kfac_empirical", kRounding},
    {"pipeline_sync", "kfac_true", 0, kRefused, "pipeline_param|TRUE_FISHER"},
    // The norm and the finiteness of the whole gradient are sums over one replica's stages (Optimizer::
    // set_model_parts).
    {"pipeline_sync", "clip", kRounding},
    {"pipeline_sync", "resume", kRounding},
    {"pipeline_sync", "dropout", 0, kTrains, "each stage draws from its own engine: one rank interleaves the draws"},
    {"pipeline_sync", "stochastic_pool", 0, kTrains, "each stage draws from its own engine"},
    {"pipeline_sync", "loss_scale", kRounding},
    {"pipeline_async", "fusion", 0, kTrains, "ASYNC updates with stale weights by design (PETRA): no reference"},
    {"pipeline_async", "layouts", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "bf16", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "reversible", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "resume", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "dropout", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "stochastic_pool", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "kfac_empirical", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "kfac_true", 0, kRefused, "pipeline_param|TRUE_FISHER"},
    {"pipeline_async", "clip", 0, kTrains, "ASYNC: no reference"},
    {"pipeline_async", "recompute", 0, kRefused, "recompute_param|pipeline_param"},
    {"pipeline_async", "free_after_use", 0, kRefused, "blob_lifetime|pipeline_param"},
    {"pipeline_async", "loss_scale", 0, kTrains, "ASYNC: no reference"},
};

TEST_P(ComposabilityRanks, EqualsOneRankOrIsRefused) {
  const Cell& c = GetParam();
  if (c.outcome == kNotCovered) GTEST_SKIP() << "not covered: " << c.note;
  const bool pipeline = std::string(c.a).rfind("pipeline", 0) == 0;
  if (pipeline && (world_size() < 2 || world_size() % 2 != 0)) {
    GTEST_SKIP() << "a pipeline of 2 stages needs an even number of ranks";
  }
  Features with = CellFeatures(c, true), reference = CellFeatures(c, false);
  // Per rank kPerRank records a pass; the pipeline's k micro-batches per replica are the iteration's passes.
  const int replicas = pipeline ? world_size() / 2 : world_size();
  const int passes = pipeline ? kMicroBatches : with.iter_size;
  with.iter_size = passes;
  with.batch = kPerRank * passes;
  // bfloat16 rounds each pass's output gradient, which carries the loss's 1 / (records in the pass): one pass over
  // N x b records rounds other values than N passes of b (alike only where N is a power of two), so a bf16 run's
  // reference makes the replicas' passes one after the other (docs/architecture.md, "Composability").
  const bool per_pass = pipeline || reference.bf16;
  reference.iter_size = per_pass ? passes * replicas : passes;
  reference.batch = kPerRank * passes * replicas;
  // Clipping bounds the norm of the passes' sum, over replicas their mean: one rank's sum of R times the passes is
  // R times larger.
  if (per_pass) reference.clip_norm *= static_cast<float>(replicas);
  if (c.outcome == kRefused) {
    testing_data::ExpectErrorContaining([&] { Train(with, 1); }, RefusalWords(c));
    return;
  }
  const Result run = Train(with);
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kIterations));
  // Replicas hold the same weights bit for bit (the stages of a pipeline: each its own).
  const uint64_t digest = Digest(run.weights);
  MPI_Comm group;
  MPI_Comm_split(MPI_COMM_WORLD, pipeline ? world_rank() % 2 : 0, world_rank(), &group);
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&digest, &lo, 1, MPI_UINT64_T, MPI_MIN, group);
  MPI_Allreduce(&digest, &hi, 1, MPI_UINT64_T, MPI_MAX, group);
  MPI_Comm_free(&group);
  EXPECT_TRUE(all_ranks(lo == hi)) << "replicas hold different weights";
  if (c.outcome == kTrains) {
    bool finite = true;
    for (float l : run.losses) finite = finite && std::isfinite(l);
    EXPECT_TRUE(all_ranks(finite)) << "a loss is not finite";
    return;
  }
  // One rank with the whole batch, computed here (no communication): the stage's layers are compared by name.
  const Result ref = Train(reference);
  // A pipeline stage holds some of the net's layers: those are compared, by name.
  std::vector<std::vector<float>> theirs;
  for (const std::string& name : run.names) {
    const auto it = std::find(ref.names.begin(), ref.names.end(), name);
    ASSERT_NE(it, ref.names.end()) << name;
    theirs.push_back(ref.weights[static_cast<size_t>(it - ref.names.begin())]);
  }
  const std::vector<std::vector<float>>& mine = run.weights;
  const double diff = RelativeDifference(mine, theirs);
  EXPECT_TRUE(all_ranks(diff <= c.bound)) << "rank " << world_rank() << ": weights differ from one rank by " << diff;
}

// K-FAC's empirical Fisher in a SYNC pipeline of 2 stages, kMicroBatches micro-batches an iteration.
Features PipelineKfac() {
  Features f;
  f.engine = Features::kPipelineSync;
  f.batch_norm = false;
  f.kfac = 1;
  f.iter_size = kMicroBatches;
  f.batch = kPerRank * kMicroBatches;
  return f;
}

// K-FAC's factors and inverses are spread over the ranks that own their blocks (distribute_inverses), and in a
// pipeline over its stages too: a snapshot gathers them to rank 0, and a run resumed from it on as many ranks takes
// the uninterrupted run's steps, bit for bit, with either Fisher (the true one's label engines are each rank's own;
// a pipeline takes the empirical one alone).
TEST_F(ComposabilityRanks, KfacResumesAsTheUninterruptedRun) {
  std::vector<std::pair<std::string, Features>> runs;
  for (int kfac : {1, 2}) {
    Features f;
    f.engine = Features::kDataParallel;
    f.batch_norm = false;
    f.kfac = kfac;
    f.batch = kPerRank;
    runs.emplace_back("K-FAC " + std::to_string(kfac), f);
  }
  if (world_size() >= 2 && world_size() % 2 == 0) runs.emplace_back("a pipeline's K-FAC", PipelineKfac());
  for (const auto& [name, f] : runs) {
    Features resumed = f;
    resumed.resume = true;
    const Result straight = Train(f), again = Train(resumed);
    EXPECT_TRUE(all_ranks(again.losses == straight.losses)) << name << ": the losses differ";
    const double diff = RelativeDifference(again.weights, straight.weights);
    EXPECT_TRUE(all_ranks(diff == 0)) << name << ": rank " << world_rank() << "'s weights differ by " << diff;
  }
}

// A pipeline's stages find their own K-FAC blocks in the whole net's solverstate: one that no stage has is an
// error on every rank (a different net), not a block silently left out.
TEST_F(ComposabilityRanks, PipelineKfacRefusesABlockNoStageHas) {
  if (world_size() < 2 || world_size() % 2 != 0) GTEST_SKIP() << "a pipeline of 2 stages needs an even number of ranks";
  Features f = PipelineKfac();
  f.resume = true;
  const auto add_ghost = [](const std::string& file) {
    SolverState state;
    ReadSolverState(file, &state);
    ASSERT_GT(state.kfac().block_size(), 0);
    KfacBlockState ghost = state.kfac().block(0);
    ghost.set_name("ghost");
    *state.mutable_kfac()->add_block() = ghost;
    WriteSolverState(&state, file, SolverParameter::BINARYPROTO);
  };
  testing_data::ExpectErrorContaining([&] { Train(f, kIterations, add_ghost); },
                                      {"1 block(s) that no stage of this pipeline has"});
}

// K-FAC's stages under a dynamic loss scale agree on each step's finiteness (one more sum over the stages) and
// take the steps they take without one, bit for bit: the scale is a power of two, divided out of the factors' output
// gradients as of the gradient.
TEST_F(ComposabilityRanks, PipelineKfacUnderALossScaleEqualsWithout) {
  if (world_size() < 2 || world_size() % 2 != 0) GTEST_SKIP() << "a pipeline of 2 stages needs an even number of ranks";
  Features scaled = PipelineKfac();
  scaled.loss_scale = true;
  const Result plain = Train(PipelineKfac()), with = Train(scaled);
  EXPECT_EQ(with.loss_scale, 4096 << (kIterations / 2));  // it grew: every step was taken
  EXPECT_TRUE(all_ranks(with.losses == plain.losses));
  const double diff = RelativeDifference(with.weights, plain.weights);
  EXPECT_TRUE(all_ranks(diff == 0)) << "rank " << world_rank() << "'s weights differ by " << diff;
}

// A pipeline's dynamic loss scale (the same on every stage) is in its snapshot, and every stage resumes from it:
// the resumed run scales as the uninterrupted one (a power of two leaves the weights alike either way, so the scale
// itself is compared).
TEST_F(ComposabilityRanks, PipelineLossScaleResumesAsTheUninterruptedRun) {
  if (world_size() < 2 || world_size() % 2 != 0) GTEST_SKIP() << "a pipeline of 2 stages needs an even number of ranks";
  Features f;
  f.engine = Features::kPipelineSync;
  f.loss_scale = true;
  f.iter_size = kMicroBatches;
  f.batch = kPerRank * kMicroBatches;
  Features resumed = f;
  resumed.resume = true;
  const Result straight = Train(f), again = Train(resumed);
  EXPECT_EQ(straight.loss_scale, 4096 << (kIterations / 2));  // doubled every 2 iterations
  EXPECT_TRUE(all_ranks(again.loss_scale == straight.loss_scale)) << "rank " << world_rank() << " resumed at scale "
                                                                  << again.loss_scale;
  EXPECT_TRUE(all_ranks(again.losses == straight.losses));
  // The learned weights: a snapshot drains the pipeline, which averages the replicas' BatchNorm statistics.
  const double diff = RelativeDifference(again.learned, straight.learned);
  EXPECT_TRUE(all_ranks(diff == 0)) << "rank " << world_rank() << "'s weights differ by " << diff;
}

std::string CellName(const ::testing::TestParamInfo<Cell>& info) {
  return std::string(info.param.a) + "_x_" + info.param.b;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ComposabilityRanks, ::testing::ValuesIn(kCells), CellName);

}  // namespace
}  // namespace strata
