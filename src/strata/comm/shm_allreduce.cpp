#include "strata/comm/shm_allreduce.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hier_allreduce.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/shm_group.hpp"
#include "strata/comm/topology.hpp"

namespace strata {

using comm_detail::at;
using comm_detail::block_begin;
using comm_detail::ShmGroup;

namespace {
// Up to this many bytes a chunk is summed whole by every rank after one flag wait: the redundant sums
// cost less than the second wait, which needs every rank to have been scheduled once more.
const size_t kWholeSumBytes = [] {
  const char* env = getenv("STRATA_ALLREDUCE_SHM_WHOLE_SUM_BYTES");
  return env ? static_cast<size_t>(atoll(env)) : size_t(16384);
}();

}  // namespace

ShmAllreduce::ShmAllreduce(MPI_Comm comm, size_t chunk_bytes) : Allreduce(comm) {
  const bool oversubscribed = size_ > sysconf(_SC_NPROCESSORS_ONLN);
  chunk_bytes_ = comm_detail::chunk_bytes_from_env(
      "STRATA_ALLREDUCE_SHM_CHUNK_BYTES",
      chunk_bytes ? chunk_bytes : oversubscribed ? kSharedCoreChunkBytes : kDedicatedCoreChunkBytes);
  if (size_ == 1) return;
  // The topology is the same on every rank, so all take the same path. Ranks on several machines cannot share
  // one segment: hier, over the machines MPI sees (not STRATA_RANKS_PER_NODE's virtual ones).
  const Topology topology = Topology::of(comm);
  if (topology.nodes() > 1) {
    fallback_ = std::make_unique<HierarchicalAllreduce>(comm, topology, CrossoverTable::builtin_network());
    return;
  }
  group_ = std::make_unique<ShmGroup>(comm, 2 * chunk_bytes_);
  if (!group_->ok()) {
    group_.reset();
    fallback_ = make_allreduce_algorithm("ring_seg", comm);
  }
}

ShmAllreduce::~ShmAllreduce() = default;

std::string ShmAllreduce::explain(size_t bytes) const {
  if (!fallback_) return "shm";
  const bool elsewhere = fallback_->name() == "hier";
  return std::string("shm: ") + (elsewhere ? "ranks on several machines" : "no shared segment") + " -> " +
         fallback_->explain(bytes);
}

void ShmAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  if (fallback_) {
    fallback_->run(buf, count, t);
    return;
  }
  const size_t es = size_of(t);
  const size_t chunk = chunk_bytes_ / es;
  const int n = size_;
  for (size_t b = 0; b < count; b += chunk) {
    const size_t len = std::min(chunk, count - b);
    const uint64_t round = ++round_;
    const size_t half = (round % 2) * chunk_bytes_;
    char* data = at(buf, b, t);
    char* mine = group_->slot(rank_) + half;
    if (len * es <= kWholeSumBytes) {
      // Small: every rank copies all of it in and, after one flag wait instead of two, sums all N copies
      // itself. Every rank adds the same operands in the same (rank) order, so all end bit-identical.
      memcpy(mine, data, len * es);
      group_->raise(ShmGroup::kArrived, round);
      group_->wait_all(ShmGroup::kArrived, round);
      memcpy(data, group_->slot(0) + half, len * es);
      for (int q = 1; q < n; ++q) comm_detail::sum_into(data, group_->slot(q) + half, len, t);
      continue;
    }
    auto begin = [&](int q) { return block_begin(q, n, len) * es; };
    auto bytes = [&](int q) { return begin(q + 1) - begin(q); };
    for (int q = 0; q < n; ++q)
      if (q != rank_) memcpy(mine + begin(q), data + begin(q), bytes(q));
    group_->raise(ShmGroup::kArrived, round);
    group_->wait_all(ShmGroup::kArrived, round);
    const size_t own = begin(rank_), own_elems = bytes(rank_) / es;
    for (int q = 0; q < n; ++q)
      if (q != rank_) comm_detail::sum_into(data + own, group_->slot(q) + half + own, own_elems, t);
    memcpy(mine + own, data + own, bytes(rank_));
    group_->raise(ShmGroup::kReduced, round);
    group_->wait_all(ShmGroup::kReduced, round);
    for (int q = 0; q < n; ++q)
      if (q != rank_) memcpy(data + begin(q), group_->slot(q) + half + begin(q), bytes(q));
  }
}

}  // namespace strata
