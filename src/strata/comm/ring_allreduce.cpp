#include "strata/comm/ring_allreduce.hpp"

namespace strata {

using comm_detail::block_begin;
using comm_detail::at;

RingAllreduce::RingAllreduce(MPI_Comm comm, size_t segment_bytes)
    : Allreduce(comm),
      segmented_(segment_bytes > 0),
      next_((rank_ + 1) % size_),
      prev_((rank_ + size_ - 1) % size_),
      ex_(comm, segment_bytes) {}

void RingAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  const int n = size_;
  // Block indices wrap around the ring; block n-1 ends at block_begin(n) == count.
  auto wrap = [n](int block) { return ((block % n) + n) % n; };
  auto b = [&](int block) { return block_begin(wrap(block), n, count); };
  auto len = [&](int block) { return block_begin(wrap(block) + 1, n, count) - b(block); };
  for (int s = 0; s < n - 1; ++s) {
    int send = rank_ - s, recv = rank_ - s - 1;
    ex_.send_recv_sum(at(buf, b(send), t), len(send), next_, at(buf, b(recv), t), len(recv), prev_, t);
  }
  for (int s = 0; s < n - 1; ++s) {
    int send = rank_ + 1 - s, recv = rank_ - s;
    ex_.send_recv(at(buf, b(send), t), len(send), next_, at(buf, b(recv), t), len(recv), prev_, t);
  }
}

}  // namespace strata
