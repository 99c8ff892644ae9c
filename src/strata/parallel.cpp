#include "strata/parallel.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace strata {
namespace {

int positive_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  const int n = std::atoi(v);
  return n > 0 ? n : 0;
}

}  // namespace

int cores_per_local_rank() {
  int local_ranks = positive_env("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local_ranks == 0) local_ranks = positive_env("MPI_LOCALNRANKS");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_ranks));
}

namespace {

int init_threads() {
  int threads = positive_env("OMP_NUM_THREADS");
  if (threads == 0) threads = positive_env("OPENBLAS_NUM_THREADS");
  if (threads == 0) {
    // Ranks that mpirun started on this machine share its cores (Open MPI says how many in
    // OMPI_COMM_WORLD_LOCAL_SIZE, MPICH in MPI_LOCALNRANKS): each computes with its share. With a full team per
    // rank, every OpenMP barrier waits for threads the other ranks have descheduled; LeNet on 2 ranks of 2
    // cores ran at 3-5 iterations/s instead of 90.
    threads = cores_per_local_rank();
  }
  omp_set_num_threads(threads);
  // OpenBLAS computes on the caller's thread; the OpenMP team is the only pool.
  openblas_set_num_threads(1);
  return threads;
}

// Decided when the library loads, before any thread of ours exists.
int g_threads = init_threads();

}  // namespace

int compute_threads() { return g_threads; }

void set_compute_threads(int threads) {
  g_threads = std::max(1, threads);
  omp_set_num_threads(g_threads);
}

bool parallel_worthwhile(long long work) {
  // Below this much work waking the team costs more than it saves (measured on 2 cores, element-wise loops).
  constexpr long long kMinWork = 1 << 15;
  return g_threads > 1 && work >= kMinWork && !omp_in_parallel();
}

}  // namespace strata
