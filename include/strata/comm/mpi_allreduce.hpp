// The reference: MPI_Allreduce itself ("mpi"), and under Open MPI each of its own forced algorithms
// ("mpi_linear", "mpi_nonoverlapping", "mpi_recursive_doubling", "mpi_ring", "mpi_segmented_ring",
// "mpi_rabenseifner": coll_tuned_allreduce_algorithm 1..6), so the benchmark can compare against the
// best of them interleaved in one process instead of across runs whose latencies drift.
//
// A forced algorithm is set through the MPI tool interface (MPI_T) on a private duplicate of the
// communicator: Open MPI's tuned component reads coll_tuned_allreduce_algorithm when a communicator is
// created. That needs coll_tuned_use_dynamic_rules=1 before MPI_Init (allreduce_bench sets it); without
// it, or under another MPI, constructing a forced variant throws strata::Error.
//
// MPI_Allreduce makes no promise that ranks end bit-identical, though Open MPI's algorithms do on
// the data we tried.
#pragma once

#include <string>

#include "strata/comm/allreduce.hpp"

namespace strata {

class MpiAllreduce : public Allreduce {
 public:
  // openmpi_algorithm = 0: MPI_Allreduce as configured; 1..6: that Open MPI algorithm forced.
  explicit MpiAllreduce(MPI_Comm comm, int openmpi_algorithm = 0, size_t openmpi_segment_bytes = 0);
  ~MpiAllreduce() override;
  std::string name() const override;
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

  // 0 for "mpi", 1..6 for the forced names, -1 if the name is not one of these.
  static int openmpi_algorithm_of(const std::string& name);

 private:
  int algorithm_;
  MPI_Comm own_comm_ = MPI_COMM_NULL;  // the duplicate a forced algorithm runs on
};

}  // namespace strata
