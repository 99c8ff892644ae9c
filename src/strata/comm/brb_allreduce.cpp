#include "strata/comm/brb_allreduce.hpp"

namespace strata {

BrbAllreduce::BrbAllreduce(MPI_Comm comm, size_t segment_bytes) : Allreduce(comm), ex_(comm, segment_bytes) {
  for (int dist = 1; dist < size_; dist *= 2) {
    if (rank_ & dist) {
      parent_ = rank_ - dist;
      break;
    }
    if (rank_ + dist < size_) children_.push_back(rank_ + dist);
  }
}

void BrbAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  for (int child : children_) ex_.send_recv_sum(nullptr, 0, MPI_PROC_NULL, buf, count, child, t);
  if (parent_ >= 0) {
    ex_.send_recv_sum(buf, count, parent_, nullptr, 0, MPI_PROC_NULL, t);  // cut as the parent sums it
    ex_.send_recv(nullptr, 0, MPI_PROC_NULL, buf, count, parent_, t);
  }
  // Farthest child first: it heads the largest subtree, which has the most rounds still ahead of it.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it)
    ex_.send_recv(buf, count, *it, nullptr, 0, MPI_PROC_NULL, t);
}

}  // namespace strata
