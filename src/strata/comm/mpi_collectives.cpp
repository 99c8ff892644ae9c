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

MpiCollectives::MpiCollectives(MPI_Comm comm, strata::Allreduce* allreduce, StallWatch watch)
    : comm_(comm), allreduce_(allreduce), watch_(watch) {
  STRATA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

template <typename T>
void MpiCollectives::ReduceScatterT(T* buf, const std::vector<int>& counts) {
  CHECK_EQ(static_cast<int>(counts.size()), size_);
  const MPI_Datatype type = mpi_type_of(data_type_of<T>());
  // MPI_IN_PLACE would leave this rank's block at the front of buf, not at its place: receive aside instead.
  std::vector<T> mine(std::max(counts[rank_], 1));
  StallWatch::Scope watched(watch_);
  STRATA_MPI_CHECK(MPI_Reduce_scatter(buf, mine.data(), counts.data(), type, MPI_SUM, comm_));
  std::copy(mine.begin(), mine.begin() + counts[rank_], buf + offsets_of(counts)[rank_]);
}

template <typename T>
void MpiCollectives::AllgatherT(T* buf, const std::vector<int>& counts) {
  CHECK_EQ(static_cast<int>(counts.size()), size_);
  const std::vector<int> offsets = offsets_of(counts);
  StallWatch::Scope watched(watch_);
  STRATA_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), offsets.data(),
                                  mpi_type_of(data_type_of<T>()), comm_));
}

// The header's overrides call these for both types.
template void MpiCollectives::ReduceScatterT<float>(float*, const std::vector<int>&);
template void MpiCollectives::ReduceScatterT<double>(double*, const std::vector<int>&);
template void MpiCollectives::AllgatherT<float>(float*, const std::vector<int>&);
template void MpiCollectives::AllgatherT<double>(double*, const std::vector<int>&);

std::vector<std::string> MpiCollectives::GatherToRoot(const std::string& mine) {
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank_ == 0 ? size_ : 0);
  StallWatch::Scope watched(watch_);
  STRATA_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_));
  std::vector<int> offsets;
  std::vector<char> all;
  if (rank_ == 0) {
    offsets = offsets_of(lens);
    all.resize(std::max<size_t>(static_cast<size_t>(offsets.back()) + lens.back(), 1));
  }
  STRATA_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0,
                               comm_));
  std::vector<std::string> gathered;
  for (int r = 0; r < static_cast<int>(lens.size()); ++r) gathered.emplace_back(all.data() + offsets[r], lens[r]);
  return gathered;
}

}  // namespace strata
