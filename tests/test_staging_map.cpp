// The bookkeeping of the data-parallel engine's GPU path (strata/engine/gradient_staging.hpp), which needs no GPU:
// how buckets are cut into chunks, and which pieces of which gradients each chunk's copies move. A wrong piece would copy the
// wrong elements to or from the staging buffer silently; tests/mpi/test_gradient_staging.cpp runs the copies.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "strata/engine/gradient_staging.hpp"

namespace strata {
namespace {

TEST(StagingMapTest, CutBucketChunksSingleGradientsAndKeepsFusedBucketsWhole) {
  auto single = CutBucket(10, false, 4);
  ASSERT_EQ(single.size(), 3u);
  EXPECT_EQ(single[0].offset, 0u);
  EXPECT_EQ(single[0].count, 4u);
  EXPECT_EQ(single[2].offset, 8u);
  EXPECT_EQ(single[2].count, 2u);
  auto fused = CutBucket(10, true, 4);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0].count, 10u);
  // chunk_bytes below one element (the engine requires 64 bytes, doubles are 8): one element per chunk.
  EXPECT_EQ(CutBucket(3, false, 0).size(), 3u);
  EXPECT_EQ(CutBucket(8, false, 8).size(), 1u);
}

TEST(StagingMapTest, PiecesOfChunksAndFusedBuckets) {
  StagingMap map({{10}, {3, 5, 2}, {4}}, 4);
  ASSERT_EQ(map.num_buckets(), 3);
  EXPECT_EQ(map.total_chunks(), 3 + 1 + 1);
  EXPECT_EQ(map.chunk_id(1, 0), 3);
  EXPECT_EQ(map.chunk_id(2, 0), 4);
  EXPECT_EQ(map.elements(1), 10u);

  // A single gradient: each chunk is one piece at the same offset in gradient and buffer.
  const auto& last = map.pieces(0, 2);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].slot, 0);
  EXPECT_EQ(last[0].grad_offset, 8u);
  EXPECT_EQ(last[0].staging_offset, 8u);
  EXPECT_EQ(last[0].count, 2u);
  EXPECT_EQ(map.chunk_at(0, 8, 2), 2);

  // A fused bucket: one chunk, one piece per gradient, back to back in the buffer.
  const auto& fused = map.pieces(1, 0);
  ASSERT_EQ(fused.size(), 3u);
  const size_t want_staging[] = {0, 3, 8}, want_count[] = {3, 5, 2};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fused[i].slot, i);
    EXPECT_EQ(fused[i].grad_offset, 0u);
    EXPECT_EQ(fused[i].staging_offset, want_staging[i]);
    EXPECT_EQ(fused[i].count, want_count[i]);
  }
  EXPECT_EQ(map.chunk_at(1, 0, 10), 0);
}

// Random buckets and chunk sizes: every element of every gradient is moved by exactly one piece of exactly one
// chunk, to its place in the buffer, and the chunks are what the engine's tasks are (CutBucket).
TEST(StagingMapTest, PiecesCoverEveryGradientElementExactlyOnce) {
  std::mt19937 rng(1701);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<size_t>> sizes(1 + rng() % 5);
    for (auto& bucket : sizes) {
      bucket.resize(rng() % 3 == 0 ? 1 + rng() % 4 : 1);
      for (auto& n : bucket) n = 1 + rng() % 50;
    }
    const size_t chunk = 1 + rng() % 20;
    StagingMap map(sizes, chunk);
    int id = 0;
    for (int b = 0; b < map.num_buckets(); ++b) {
      const auto want = CutBucket(map.elements(b), sizes[b].size() > 1, chunk);
      ASSERT_EQ(map.chunks(b).size(), want.size());
      std::vector<std::vector<int>> seen(sizes[b].size());
      for (size_t s = 0; s < sizes[b].size(); ++s) seen[s].assign(sizes[b][s], 0);
      size_t slot_start = 0;
      std::vector<size_t> starts;
      for (size_t n : sizes[b]) {
        starts.push_back(slot_start);
        slot_start += n;
      }
      for (int c = 0; c < static_cast<int>(want.size()); ++c) {
        EXPECT_EQ(map.chunks(b)[c].offset, want[c].offset);
        EXPECT_EQ(map.chunks(b)[c].count, want[c].count);
        EXPECT_EQ(map.chunk_at(b, want[c].offset, want[c].count), c);
        EXPECT_EQ(map.chunk_id(b, c), id++);
        size_t covered = 0;
        for (const auto& p : map.pieces(b, c)) {
          ASSERT_LT(p.slot, static_cast<int>(sizes[b].size()));
          ASSERT_LE(p.grad_offset + p.count, sizes[b][p.slot]);
          EXPECT_EQ(p.staging_offset, starts[p.slot] + p.grad_offset) << "a piece lands in the wrong place";
          EXPECT_GE(p.staging_offset, want[c].offset);
          EXPECT_LE(p.staging_offset + p.count, want[c].offset + want[c].count);
          for (size_t k = 0; k < p.count; ++k) ++seen[p.slot][p.grad_offset + k];
          covered += p.count;
        }
        EXPECT_EQ(covered, want[c].count);
      }
      for (const auto& s : seen) {
        for (int n : s) ASSERT_EQ(n, 1) << "an element moved " << n << " times";
      }
    }
    EXPECT_EQ(map.total_chunks(), id);
  }
}

}  // namespace
}  // namespace strata
