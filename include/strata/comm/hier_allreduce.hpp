// The hierarchical allreduce, for ranks spread over several machines ("nodes"): inside each node the ranks
// reduce through shared memory, across nodes every rank carries its own share over the network, and inside
// each node the results are shared again. Every rank and every network link works, instead of a leader per
// node pushing the whole message while its neighbours wait.
//
// The message goes through in chunks. A chunk is cut into L blocks, L the most ranks any node has; block s
// belongs, on every node, to the local rank s mod (ranks on that node), so on nodes of L ranks each rank
// owns one block and on smaller nodes some own several. For one chunk:
//   1. every rank copies the blocks it does not own into its shared-memory slot and raises "arrived";
//   2. once the node has arrived, each owner sums its block over the node (its own buffer plus the others'
//      copies, in local-rank order), then allreduces that node sum with the owners of the same block on the
//      other nodes, over the network (one communicator per block), and copies the result into its slot;
//      "reduced";
//   3. once their owners have reduced, every rank copies the blocks it does not own from their owners' slots.
// A rank waits only for what it reads: the node's arrivals if it owns a block, its blocks' owners' "reduced"
// if it does not own them all. In a single-block chunk the owner (local rank 0) thus waits once and the
// others once, where waiting on every flag would put each rank's scheduling on everyone's path.
// The network part is itself chosen by size from a crossover table for the number of nodes (by default the
// seed paper's hybrid: BRD for small messages, the bandwidth-optimal algorithms for large ones), and a chunk
// of at most kSingleBlockBytes is one block: at that size a message costs its latency, and one allreduce per
// node beats L of them.
//
// Per rank and chunk of M bytes: (L-1)/L M copied in, M/L summed L-fold, M/L over the network (allreduced
// across the nodes), (L-1)/L M copied out. Every element is summed on its owner only, and the network
// algorithms give bit-identical results on all their ranks, so all ranks end bit-identical.
//
// Slots hold two chunks (chunk k uses half k % 2); half k % 2 is written again only in chunk k + 2, after
// every rank of the node has arrived at chunk k + 1 and so finished reading chunk k: a rank that owns a block
// of chunk k + 1 waited for those arrivals itself, and one that owns none waited for an owner's "reduced",
// which that owner raised only after them. A node of one rank
// needs no slots: it only allreduces over the network, and with one rank on every node the whole message
// goes to the network algorithm at once, unchunked. When the shared-memory segment cannot be mapped on
// some node, every rank runs ring_seg over the whole communicator instead (same results, by messages).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/topology.hpp"

namespace strata {

namespace comm_detail {
class ShmGroup;
}
class CrossoverTable;
class HybridAllreduce;

class HierarchicalAllreduce : public Allreduce {
 public:
  // Collective over comm. topology: where comm's ranks run (Topology::detect(comm) by default).
  // network: the crossover table for the allreduce across nodes (CrossoverTable::builtin_network() by
  // default); it must have rows for the number of nodes. chunk_bytes: 0 picks kDefaultChunkBytes; the
  // environment variable STRATA_ALLREDUCE_HIER_CHUNK_BYTES overrides both.
  explicit HierarchicalAllreduce(MPI_Comm comm);
  HierarchicalAllreduce(MPI_Comm comm, const Topology& topology, const CrossoverTable& network,
                        size_t chunk_bytes = 0);
  ~HierarchicalAllreduce() override;
  std::string name() const override { return "hier"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;
  std::string explain(size_t bytes) const override;

  const Topology& topology() const { return topology_; }
  // The network algorithm a block of `bytes` bytes goes to ("" with one node: no network part).
  std::string network_choice(size_t bytes) const;

  // Big enough that the network part of a chunk (chunk / L) is a few hundred KiB at least, so its per-message
  // cost is small; small enough that two chunks per rank of shared memory stay modest.
  static constexpr size_t kDefaultChunkBytes = 4 << 20;
  static constexpr size_t kSingleBlockBytes = 16384;

 private:
  void run_chunk(char* data, size_t len, DataType t, size_t es);
  // One rank on every node: no slots to stage through, so the network algorithm takes the whole message.
  bool whole_message() const { return !shm_ && blocks_ == 1; }

  Topology topology_;
  size_t chunk_bytes_ = 0;
  int blocks_ = 1;  // L
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> block_comms_;  // owned blocks' network communicators (to free)
  std::vector<std::unique_ptr<HybridAllreduce>> network_;  // by block: its owners' allreduce, null if not ours
  std::unique_ptr<comm_detail::ShmGroup> shm_;
  std::unique_ptr<Allreduce> fallback_;
  uint64_t round_ = 0;
};

}  // namespace strata
