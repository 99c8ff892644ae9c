#include "strata/comm/mpi_collectives.hpp"

#include <algorithm>
#include <numeric>

#include <glog/logging.h>

#include "strata/comm/communicator.hpp"

namespace strata {

namespace {

std::vector<int> offsets_of(const std::vector<int>& counts) {
  std::vector<int> offsets(counts.size(), 0);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  return offsets;
}

}  // namespace

MpiCollectives::MpiCollectives(MPI_Comm comm, strata::Allreduce* allreduce)
    : comm_(comm), allreduce_(allreduce) {
  STRATA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

template <typename T>
void MpiCollectives::ReduceScatterT(T* buf, const std::vector<int>& counts) {
  CHECK_EQ(static_cast<int>(counts.size()), size_);
  const MPI_Datatype type = mpi_type_of(data_type_of<T>());
  // MPI_IN_PLACE would leave this rank's block at the front of buf, not at its place: receive aside instead.
  std::vector<T> mine(std::max(counts[rank_], 1));
  STRATA_MPI_CHECK(MPI_Reduce_scatter(buf, mine.data(), counts.data(), type, MPI_SUM, comm_));
  std::copy(mine.begin(), mine.begin() + counts[rank_], buf + offsets_of(counts)[rank_]);
}

template <typename T>
void MpiCollectives::AllgatherT(T* buf, const std::vector<int>& counts) {
  CHECK_EQ(static_cast<int>(counts.size()), size_);
  const std::vector<int> offsets = offsets_of(counts);
  STRATA_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), offsets.data(),
                                  mpi_type_of(data_type_of<T>()), comm_));
}

}  // namespace strata
