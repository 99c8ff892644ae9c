// Helpers the MPI tests share: this process's place in MPI_COMM_WORLD and agreement across ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "strata/device.hpp"

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

// True on every rank iff every rank passed the same value.
inline bool same_on_all_ranks(uint64_t v) {
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Why the GPU tests cannot run here, for their skip message; "" when they can, after binding this rank to its GPU
// (the local rank's, as `strata train` does). Every rank of a job on one machine sees the same, so they all skip
// or all run.
inline std::string gpu_missing() {
  if (!gpu_build()) return "this build has no GPU support (no CUDA toolkit at build time)";
  if (gpu_device_count() == 0) {
    return "no GPU: cudaGetDeviceCount reports none on this machine; these tests run on a GPU machine";
  }
  if (selected_gpu_device() < 0) select_gpu_device(-1);
  return "";
}

}  // namespace mpi_test
}  // namespace strata
