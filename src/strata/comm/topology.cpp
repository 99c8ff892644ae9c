#include "strata/comm/topology.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "strata/common.hpp"
#include "strata/comm/communicator.hpp"

namespace strata {

int Topology::max_local_size() const {
  size_t m = 0;
  for (const auto& r : ranks_of_node) m = std::max(m, r.size());
  return static_cast<int>(m);
}

bool Topology::uniform() const {
  for (const auto& r : ranks_of_node)
    if (r.size() != ranks_of_node[0].size()) return false;
  return true;
}

std::string Topology::describe() const {
  std::ostringstream s;
  const char* unit = nodes() == 1 ? " node" : " nodes";
  if (uniform()) {
    s << nodes() << unit << " x " << ranks_of_node[0].size() << (ranks_of_node[0].size() == 1 ? " rank" : " ranks");
    return s.str();
  }
  s << nodes() << unit << " (";
  for (int n = 0; n < nodes(); ++n) s << (n ? "+" : "") << ranks_of_node[n].size();
  s << " ranks)";
  return s.str();
}

Topology Topology::from_nodes(int rank, std::vector<int> node_of) {
  Topology t;
  t.rank = rank;
  t.size = static_cast<int>(node_of.size());
  t.node_of = std::move(node_of);
  t.local_rank_of.resize(t.size);
  for (int r = 0; r < t.size; ++r) {
    const int n = t.node_of[r];
    STRATA_REQUIRE(n >= 0 && n <= t.nodes()) << "node numbers must be given in order of their lowest rank";
    if (n == t.nodes()) t.ranks_of_node.emplace_back();
    t.local_rank_of[r] = static_cast<int>(t.ranks_of_node[n].size());
    t.ranks_of_node[n].push_back(r);
  }
  t.node = t.node_of[rank];
  t.local_rank = t.local_rank_of[rank];
  return t;
}

namespace {
// Every rank's lowest rank on its node: the same number on the ranks of one node, and distinct across nodes.
Topology from_leaders(MPI_Comm comm, int leader) {
  int rank = 0, size = 1;
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  STRATA_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> leader_of(size);
  STRATA_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leader_of.data(), 1, MPI_INT, comm));
  // Renumber the leaders 0, 1, ... in order of first appearance, which is the order of their lowest rank.
  std::vector<int> node_of(size), number(size, -1);
  int nodes = 0;
  for (int r = 0; r < size; ++r) {
    int& n = number[leader_of[r]];
    if (n < 0) n = nodes++;
    node_of[r] = n;
  }
  return Topology::from_nodes(rank, std::move(node_of));
}
}  // namespace

Topology Topology::of(MPI_Comm comm) {
  int rank = 0;
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node;
  STRATA_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int leader = rank;
  STRATA_MPI_CHECK(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node));
  STRATA_MPI_CHECK(MPI_Comm_free(&node));
  return from_leaders(comm, leader);
}

Topology Topology::virtual_nodes(MPI_Comm comm, int ranks_per_node) {
  STRATA_REQUIRE(ranks_per_node >= 1) << "ranks per node must be at least 1, not " << ranks_per_node;
  int rank = 0;
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return from_leaders(comm, rank / ranks_per_node * ranks_per_node);
}

Topology Topology::detect(MPI_Comm comm) {
  const char* env = getenv("STRATA_RANKS_PER_NODE");
  const int k = env ? atoi(env) : 0;
  return k > 0 ? virtual_nodes(comm, k) : of(comm);
}

}  // namespace strata
