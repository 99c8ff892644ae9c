#include "strata/comm/linear_allreduce.hpp"

#include <algorithm>

#include "strata/comm/communicator.hpp"

namespace strata {

using comm_detail::at;

namespace {
constexpr int kTag = 4243;
}

LinearAllreduce::LinearAllreduce(MPI_Comm comm) : Allreduce(comm), reqs_(size_) {}

void LinearAllreduce::run(void* buf, size_t count, DataType t) {
  if (size_ == 1) return;
  // MPI counts are int: very large buffers (which this algorithm is not meant for) go in pieces.
  constexpr size_t kPiece = size_t(1) << 28;
  for (size_t b = 0; b < count; b += kPiece) run_piece(at(buf, b, t), std::min(kPiece, count - b), t);
}

void LinearAllreduce::run_piece(void* buf, size_t count, DataType t) {
  const int n = static_cast<int>(count);
  const MPI_Datatype mt = mpi_type_of(t);
  if (rank_ != 0) {
    STRATA_MPI_CHECK(MPI_Isend(buf, n, mt, 0, kTag, comm_, &reqs_[0]));
    comm_detail::wait_all(1, &reqs_[0]);
    STRATA_MPI_CHECK(MPI_Irecv(buf, n, mt, 0, kTag, comm_, &reqs_[0]));
    comm_detail::wait_all(1, &reqs_[0]);
    return;
  }
  // Two slots, as in Exchange: rank r+1's buffer arrives while rank r's is summed, and the scratch stays
  // in cache instead of growing with N. Summing in rank order keeps the bits independent of timing.
  const size_t bytes = count * size_of(t);
  char* slots = static_cast<char*>(scratch_.get(bytes * std::min(2, size_ - 1)));
  auto post = [&](int r) {
    STRATA_MPI_CHECK(MPI_Irecv(slots + ((r - 1) % 2) * bytes, n, mt, r, kTag, comm_, &reqs_[r - 1]));
  };
  post(1);
  if (size_ > 2) post(2);
  for (int r = 1; r < size_; ++r) {
    comm_detail::wait_all(1, &reqs_[r - 1]);
    comm_detail::sum_into(buf, slots + ((r - 1) % 2) * bytes, count, t);
    if (r + 2 < size_) post(r + 2);
  }
  for (int r = 1; r < size_; ++r) STRATA_MPI_CHECK(MPI_Isend(buf, n, mt, r, kTag, comm_, &reqs_[r - 1]));
  comm_detail::wait_all(size_ - 1, reqs_.data());
}

}  // namespace strata
