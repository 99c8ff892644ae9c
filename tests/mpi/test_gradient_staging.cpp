// GradientStaging on its own (strata/engine/gradient_staging.hpp), on however many ranks mpirun started. Each rank's
// gradients hold values that differ by rank; the main thread stages every bucket and another thread reduces every
// chunk, as the data-parallel engine's communication threads do. Afterwards every rank must hold the sum over the
// ranks, bit for bit the same on every rank. The buckets: one gradient cut into 5 chunks (the last one short), a fused bucket of
// three gradients, and one gradient that is exactly one chunk.
//
// The CPU test mode (plain copies in place of the device copies) runs everywhere. The device versions, HOST with its
// streams and events and NCCL, need a GPU and skip with a message without one; on the GPU each bucket's values are
// last written by a kernel queued behind a slow GEMM just before the bucket is staged, so a copy that did not wait
// for the compute stream would read the old values.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mpi/mpi_test_util.hpp"
#include "strata/comm/allreduce.hpp"
#include "strata/engine/gradient_staging.hpp"
#include "strata/common.hpp"
#include "strata/device.hpp"
#include "strata/math_functions.hpp"

namespace strata {
namespace {

using mpi_test::all_ranks;
using mpi_test::same_on_all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

constexpr size_t kChunkElems = 8;

// Element i of bucket b's gradient number s on rank r.
float Value(int b, int s, int i, int r) { return 0.25f * static_cast<float>(b * 64 + s * 16 + i) + static_cast<float>(r); }

struct Gradients {
  std::vector<std::unique_ptr<Blob<float>>> blobs;
  StagingSetup<float> setup;
  // Device work that must outlive staging: freeing device memory (cudaFree) would wait for all queued work first.
  std::vector<std::unique_ptr<Blob<float>>> scratch;
};

Gradients MakeGradients(CommParameter::GpuPath path) {
  const std::vector<std::vector<int>> sizes = {{37}, {5, 3, 11}, {8}};
  Gradients g;
  for (size_t b = 0; b < sizes.size(); ++b) {
    g.setup.buckets.emplace_back();
    for (size_t s = 0; s < sizes[b].size(); ++s) {
      g.blobs.emplace_back(new Blob<float>(std::vector<int>{sizes[b][s]}));
      Blob<float>* blob = g.blobs.back().get();
      float* d = blob->mutable_cpu_diff();
      for (int i = 0; i < blob->count(); ++i) d[i] = Value(b, s, i, world_rank());
      g.setup.buckets.back().push_back(blob);
    }
  }
  g.setup.chunk_elems = kChunkElems;
  g.setup.path = path;
  g.setup.world = MPI_COMM_WORLD;
  return g;
}

// Makes the staging, runs `before_stage` (after the setup's allocations, which may wait for the device), stages
// every bucket (this thread) and reduces every chunk on a second thread, then checks the sum. `factor`: what the
// values are multiplied by before staging.
void StageReduceAndCheck(Gradients& g, float factor, const std::string& what,
                         const std::function<void()>& before_stage = [] {}) {
  SCOPED_TRACE(what);
  auto staging = MakeGradientStaging(g.setup);
  ASSERT_TRUE(staging != nullptr);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  {
    auto allreduce = make_allreduce_algorithm("brd", comm);
    before_stage();
    for (size_t b = 0; b < g.setup.buckets.size(); ++b) staging->Stage(static_cast<int>(b));
    std::string failure;
    std::thread worker([&] {
      try {
        bind_gpu_thread();
        for (size_t b = 0; b < g.setup.buckets.size(); ++b) {
          size_t elements = 0;
          for (const Blob<float>* blob : g.setup.buckets[b]) elements += blob->count();
          for (const ElementRange& c : CutBucket(elements, g.setup.buckets[b].size() > 1, kChunkElems)) {
            staging->Reduce(static_cast<int>(b), c.offset, c.count, *allreduce);
          }
        }
      } catch (const std::exception& e) {
        failure = e.what();
      }
    });
    worker.join();
    EXPECT_EQ(failure, "");
  }
  MPI_Comm_free(&comm);

  const int n = world_size();
  bool ok = true;
  uint64_t digest = 1469598103934665603ull;
  for (size_t b = 0; b < g.setup.buckets.size(); ++b) {
    for (size_t s = 0; s < g.setup.buckets[b].size(); ++s) {
      const Blob<float>* blob = g.setup.buckets[b][s];
      const float* d = blob->cpu_diff();
      for (int i = 0; i < blob->count(); ++i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += factor * Value(b, s, i, r);
        const bool near = std::fabs(d[i] - sum) <= 1e-6 * std::fabs(sum);
        EXPECT_TRUE(near) << "bucket " << b << " gradient " << s << "[" << i << "] = " << d[i] << ", sum over "
                          << n << " rank(s) " << sum;
        ok = ok && near;
        uint32_t bits;
        std::memcpy(&bits, &d[i], sizeof(bits));
        digest = (digest ^ bits) * 1099511628211ull;
      }
    }
  }
  EXPECT_TRUE(all_ranks(ok));
  EXPECT_TRUE(same_on_all_ranks(digest)) << "the ranks' reduced gradients are not bit-identical";
}

TEST(GradientStagingTest, HostStagingWithPlainCopiesSumsEveryChunk) {
  Strata::set_mode(Strata::CPU);
  Gradients g = MakeGradients(CommParameter::HOST);
  g.setup.stage_in_cpu_mode = true;
  StageReduceAndCheck(g, 1, "HOST staging, CPU test mode");
}

TEST(GradientStagingTest, CpuTrainingHasNoStagingAndRefusesNccl) {
  Strata::set_mode(Strata::CPU);
  Gradients g = MakeGradients(CommParameter::HOST);
  EXPECT_TRUE(MakeGradientStaging(g.setup) == nullptr);
  g.setup.path = CommParameter::NCCL;
  try {
    MakeGradientStaging(g.setup);
    ADD_FAILURE() << "NCCL in CPU training was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("applies to GPU training"), std::string::npos) << e.what();
  }
}

#ifdef STRATA_USE_CUDA
// Every gradient doubled on the device behind a GEMM of a few milliseconds, queued (not finished) when Stage runs.
void DoubleOnTheDeviceBehindSlowWork(Gradients& g) {
  const int n = 4096;
  g.scratch.emplace_back(new Blob<float>(std::vector<int>{n, n}));
  g.scratch.emplace_back(new Blob<float>(std::vector<int>{n, n}));
  const float* a_dev = g.scratch[0]->gpu_data();
  float* c_dev = g.scratch[1]->mutable_gpu_data();
  gpu_synchronize();
  gpu_gemm<float>(CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a_dev, a_dev, 0.f, c_dev);
  for (auto& blob : g.blobs) gpu_scal(blob->count(), 2.f, blob->mutable_gpu_diff());
}
#endif

TEST(GradientStagingTest, HostStagingOnTheGpuWaitsForTheComputeAndSumsEveryChunk) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
#ifdef STRATA_USE_CUDA
  Strata::set_mode(Strata::GPU);
  Gradients g = MakeGradients(CommParameter::HOST);
  for (auto& blob : g.blobs) blob->mutable_gpu_diff();  // on the device, as after backward
  StageReduceAndCheck(g, 2, "HOST staging on the GPU", [&] { DoubleOnTheDeviceBehindSlowWork(g); });
  Strata::set_mode(Strata::CPU);
#endif
}

// NCCL refuses ranks that share a GPU: on a machine with fewer GPUs than ranks every rank must stop with the same
// clear error (and none wait in a collective); with a GPU per rank (or one rank) the chunks are averaged on the
// device.
TEST(GradientStagingTest, NcclSumsEveryChunkOrRefusesRanksSharingAGpu) {
  const std::string missing = WhyNoGpu();
  if (!missing.empty()) GTEST_SKIP() << missing;
#ifndef STRATA_HAVE_NCCL
  GTEST_SKIP() << "this build has no NCCL (CMake found no nccl.h and libnccl)";
#else
  Strata::set_mode(Strata::GPU);
  Gradients g = MakeGradients(CommParameter::NCCL);
  for (auto& blob : g.blobs) blob->mutable_gpu_diff();
  if (gpu_device_count() < world_size()) {
    try {
      MakeGradientStaging(g.setup);
      ADD_FAILURE() << world_size() << " ranks on " << gpu_device_count() << " GPU(s): NCCL was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("one GPU per rank"), std::string::npos) << e.what();
    }
  } else {
    StageReduceAndCheck(g, 2, "NCCL", [&] { DoubleOnTheDeviceBehindSlowWork(g); });
  }
  Strata::set_mode(Strata::CPU);
#endif
}

}  // namespace
}  // namespace strata
