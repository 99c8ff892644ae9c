// Helpers the MPI tests share: this process's place in MPI_COMM_WORLD and agreement across ranks.
#pragma once

#include <mpi.h>

namespace strata {
namespace mpi_test {

inline int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// True on every rank iff `ok` on every rank.
inline bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace mpi_test
}  // namespace strata
