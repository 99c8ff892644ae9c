// Collectives: the few operations over the ranks of a job that code above the communication layer needs besides
// the gradient allreduce (K-FAC's factors and preconditioned gradients, test scores, statistics). Plain buffers of
// float or double; nothing here knows of blobs, nets or solvers. MpiCollectives (strata/comm/mpi_collectives.hpp)
// implements it over MPI; a single-rank run has none. Every rank makes the same calls in the same order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace strata {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums buf over the ranks, in place; every rank ends with identical values.
  virtual void Allreduce(float* buf, size_t n) = 0;
  virtual void Allreduce(double* buf, size_t n) = 0;
  // buf holds one block per rank in rank order, counts[r] values for rank r. Afterwards this rank's block holds
  // that block summed over the ranks; the other blocks are left as they were.
  virtual void ReduceScatter(float* buf, const std::vector<int>& counts) = 0;
  virtual void ReduceScatter(double* buf, const std::vector<int>& counts) = 0;
  // buf holds this rank's block at its place (the same layout); afterwards every rank holds every block.
  virtual void Allgather(float* buf, const std::vector<int>& counts) = 0;
  virtual void Allgather(double* buf, const std::vector<int>& counts) = 0;
  // Every rank's `mine` (any bytes, any length), in rank order, on rank 0; the other ranks get an empty list.
  // For state that differs by rank and that rank 0 alone writes (each rank's random engine in a solverstate).
  virtual std::vector<std::string> GatherToRoot(const std::string& mine) = 0;

  // Whether `mine` is true on every rank: the same answer everywhere (one allreduce of a count).
  bool AllTrue(bool mine) {
    float not_true = mine ? 0 : 1;
    Allreduce(&not_true, 1);
    return not_true == 0;
  }

  // The mean over the ranks, in place: Allreduce, then 1 / size() (values, such as scores or statistics, that
  // every rank computes for itself; gradients are summed, and the solver scales them).
  template <typename T>
  void AllreduceMean(T* buf, size_t n) {
    if (size() == 1 || n == 0) return;
    Allreduce(buf, n);
    const T inv = T(1) / size();
    for (size_t i = 0; i < n; ++i) buf[i] *= inv;
  }
};

}  // namespace strata
