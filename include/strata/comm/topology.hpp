// Where the ranks of a communicator run: which of them share a machine (a "node": MPI_COMM_TYPE_SHARED,
// the ranks that can map one shared-memory segment), how many nodes there are, and each rank's place on its
// node. Every rank computes the same picture, so algorithms can plan on it without further agreement.
//
// Nodes are numbered in the order of their lowest rank, and ranks inside a node in rank order, so the
// numbering does not depend on host names and is the same however mpirun mapped the ranks (by slot, by node).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace strata {

struct Topology {
  int rank = 0;
  int size = 1;
  int node = 0;        // this rank's node
  int local_rank = 0;  // this rank's place on its node
  std::vector<int> node_of;        // by rank
  std::vector<int> local_rank_of;  // by rank
  std::vector<std::vector<int>> ranks_of_node;  // by node: its ranks, ascending

  int nodes() const { return static_cast<int>(ranks_of_node.size()); }
  int local_size() const { return static_cast<int>(ranks_of_node[node].size()); }
  int max_local_size() const;
  // Every node has the same number of ranks.
  bool uniform() const;
  // "1 node x 4 ranks", "2 nodes x 2 ranks", "3 nodes (2+1+1 ranks)".
  std::string describe() const;

  // Collective over comm: the nodes as MPI sees them (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED).
  static Topology of(MPI_Comm comm);
  // Collective over comm: the ranks cut into consecutive groups of ranks_per_node, as if each group were a
  // machine of its own (the last may be smaller). Only for ranks that really share one machine: tests and
  // benchmarks use it to run the multi-node algorithms inside one machine. Throws strata::Error if
  // ranks_per_node < 1.
  static Topology virtual_nodes(MPI_Comm comm, int ranks_per_node);
  // Topology::of, unless the environment variable STRATA_RANKS_PER_NODE is set to a positive number, which
  // asks for virtual_nodes with it (allreduce_bench and the tests use it to try layouts on one machine).
  static Topology detect(MPI_Comm comm);

  // The picture from node_of (by rank) alone; node numbers must be 0.. in order of their lowest rank.
  static Topology from_nodes(int rank, std::vector<int> node_of);
};

}  // namespace strata
