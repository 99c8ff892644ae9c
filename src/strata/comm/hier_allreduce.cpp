#include "strata/comm/hier_allreduce.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "strata/common.hpp"
#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/shm_group.hpp"

namespace strata {

using comm_detail::at;
using comm_detail::block_begin;
using comm_detail::ShmGroup;

namespace {
// The network part runs on one rank per node; an algorithm that itself looks for shared memory or nodes
// would find none there (or recurse into this one).
void check_network_table(const CrossoverTable& network, int nodes) {
  for (const auto& row : network.rows_for(nodes)) {
    STRATA_REQUIRE(row.algorithm != "shm" && row.algorithm != "hier")
        << network.origin() << ": the allreduce across nodes cannot be '" << row.algorithm
        << "' (it runs on one rank per node)";
  }
}
}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm)
    : HierarchicalAllreduce(comm, Topology::detect(comm), CrossoverTable::builtin_network()) {}

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm, const Topology& topology,
                                             const CrossoverTable& network, size_t chunk_bytes)
    : Allreduce(comm),
      topology_(topology),
      chunk_bytes_(comm_detail::chunk_bytes_from_env("STRATA_ALLREDUCE_HIER_CHUNK_BYTES",
                                                      chunk_bytes ? chunk_bytes : kDefaultChunkBytes)) {
  STRATA_REQUIRE(topology_.size == size_ && topology_.rank == rank_)
      << "hier: the topology describes " << topology_.size << " ranks, the communicator has " << size_;
  if (size_ == 1) return;
  const int nodes = topology_.nodes();
  if (nodes > 1) check_network_table(network, nodes);
  blocks_ = topology_.max_local_size();
  const int local = topology_.local_rank, local_size = topology_.local_size();

  // One communicator per block among that block's owners (one rank per node, in node order). Collective:
  // every rank takes part in every split, with MPI_UNDEFINED for the blocks it does not own.
  network_.resize(blocks_);
  if (nodes > 1) {
    for (int s = 0; s < blocks_; ++s) {
      const bool owner = s % local_size == local;
      MPI_Comm c = MPI_COMM_NULL;
      STRATA_MPI_CHECK(MPI_Comm_split(comm, owner ? 0 : MPI_UNDEFINED, topology_.node, &c));
      if (!owner) continue;
      block_comms_.push_back(c);
      network_[s] = std::make_unique<HybridAllreduce>(c, network);
    }
  }

  STRATA_MPI_CHECK(MPI_Comm_split(comm, topology_.node, local, &node_comm_));
  if (local_size > 1) shm_ = std::make_unique<ShmGroup>(node_comm_, 2 * chunk_bytes_);
  // Every rank must take the same path: if any node could not map its segment, all run the fallback.
  int ok = !shm_ || shm_->ok(), all_ok = 0;
  STRATA_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
  if (!all_ok) {
    shm_.reset();
    fallback_ = make_allreduce_algorithm("ring_seg", comm);
  }
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  network_.clear();  // before the communicators they run on
  for (MPI_Comm& c : block_comms_) MPI_Comm_free(&c);
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

std::string HierarchicalAllreduce::network_choice(size_t bytes) const {
  for (const auto& a : network_)
    if (a) return a->choice(bytes);
  return "";
}

std::string HierarchicalAllreduce::explain(size_t bytes) const {
  if (fallback_) return "hier: no shared segment on some node -> " + fallback_->explain(bytes);
  std::string text = "hier over " + topology_.describe();
  // The network part of one chunk: its block (the largest, when blocks differ by an element); the whole
  // message with one rank per node.
  const size_t chunk = whole_message() ? bytes : std::min(bytes, chunk_bytes_);
  const int blocks = chunk <= kSingleBlockBytes ? 1 : blocks_;
  for (const auto& a : network_)
    if (a) return text + ", across nodes " + a->explain((chunk + blocks - 1) / blocks);
  return text;
}

void HierarchicalAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  if (fallback_) {
    fallback_->run(buf, count, t);
    return;
  }
  if (whole_message()) {
    // One rank per node: nothing to stage, so no chunks either. The network algorithm takes the whole message
    // (over TCP a chunk boundary costs a handshake and lets the connection go idle).
    network_[0]->run(buf, count, t);
    return;
  }
  const size_t es = size_of(t);
  const size_t chunk = chunk_bytes_ / es;
  for (size_t b = 0; b < count; b += chunk) run_chunk(at(buf, b, t), std::min(chunk, count - b), t, es);
}

void HierarchicalAllreduce::run_chunk(char* data, size_t len, DataType t, size_t es) {
  const int local = topology_.local_rank, local_size = topology_.local_size();
  const int blocks = len * es <= kSingleBlockBytes ? 1 : blocks_;
  auto begin = [&](int s) { return block_begin(s, blocks, len) * es; };
  auto bytes = [&](int s) { return begin(s + 1) - begin(s); };
  auto owns = [&](int s) { return s % local_size == local; };
  auto owner = [&](int s) { return s % local_size; };
  // A rank waits for the copies it reads: every rank's arrival if it owns a block, the owners' results for
  // the blocks it does not own. Blocks go to local ranks 0.. in turn, so the owners are the first
  // min(blocks, local_size) ranks, and a lone owner owns them all.
  const int owners = std::min(blocks, local_size);
  const bool owns_any = local < owners, owns_all = owners == 1 && local == 0;

  const uint64_t round = ++round_;
  const size_t half = (round % 2) * chunk_bytes_;
  char* mine = shm_ ? shm_->slot(local) + half : nullptr;
  if (shm_) {
    for (int s = 0; s < blocks; ++s)
      if (!owns(s)) memcpy(mine + begin(s), data + begin(s), bytes(s));
    shm_->raise(ShmGroup::kArrived, round);
    if (owns_any) shm_->wait_all(ShmGroup::kArrived, round);
  }
  for (int s = 0; s < blocks; ++s) {
    if (!owns(s)) continue;
    char* own = data + begin(s);
    const size_t elems = bytes(s) / es;
    if (shm_) {
      for (int q = 0; q < local_size; ++q)
        if (q != local) comm_detail::sum_into(own, shm_->slot(q) + half + begin(s), elems, t);
    }
    if (network_[s]) network_[s]->run(own, elems, t);
    if (shm_) memcpy(mine + begin(s), own, bytes(s));
  }
  if (shm_) {
    shm_->raise(ShmGroup::kReduced, round);
    if (!owns_all) shm_->wait_ranks(ShmGroup::kReduced, round, 0, owners);
    for (int s = 0; s < blocks; ++s)
      if (!owns(s)) memcpy(data + begin(s), shm_->slot(owner(s)) + half + begin(s), bytes(s));
  }
}

}  // namespace strata
