// Collectives over MPI: what the data-parallel engine hands a solver that communicates more than the gradient
// (K-FAC), and what it averages scores and statistics with. Sums go through the allreduce library (the same
// hybrid the gradients use); the block-wise reduce and gather are MPI_Reduce_scatter and MPI_Allgatherv, whose
// blocks differ in size from rank to rank.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/collectives.hpp"
#include "strata/comm/stall_watchdog.hpp"

namespace strata {

class MpiCollectives : public Collectives {
 public:
  // `allreduce` (not owned; it must outlive this object) runs on `comm`, which only the solver's thread may use.
  // watch: where the other collectives report to the stall watchdog (Communicator::watch(comm); the allreduce is
  // watched when Communicator::watched made it).
  MpiCollectives(MPI_Comm comm, strata::Allreduce* allreduce, StallWatch watch = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Allreduce(float* buf, size_t n) override { allreduce_->run(buf, n); }
  void Allreduce(double* buf, size_t n) override { allreduce_->run(buf, n); }
  void ReduceScatter(float* buf, const std::vector<int>& counts) override { ReduceScatterT(buf, counts); }
  void ReduceScatter(double* buf, const std::vector<int>& counts) override { ReduceScatterT(buf, counts); }
  void Allgather(float* buf, const std::vector<int>& counts) override { AllgatherT(buf, counts); }
  void Allgather(double* buf, const std::vector<int>& counts) override { AllgatherT(buf, counts); }
  std::vector<std::string> GatherToRoot(const std::string& mine) override;

 private:
  template <typename T>
  void ReduceScatterT(T* buf, const std::vector<int>& counts);
  template <typename T>
  void AllgatherT(T* buf, const std::vector<int>& counts);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  strata::Allreduce* allreduce_;
  StallWatch watch_;
};

}  // namespace strata
