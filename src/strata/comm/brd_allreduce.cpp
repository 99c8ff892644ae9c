#include "strata/comm/brd_allreduce.hpp"

namespace strata {

BrdAllreduce::BrdAllreduce(MPI_Comm comm, size_t segment_bytes)
    : Allreduce(comm), fold_(rank_, size_), ex_(comm, segment_bytes) {
  if (!fold_.extra)
    for (int dist = 1; dist < fold_.p; dist *= 2) peers_.push_back(fold_.real_rank(fold_.vrank ^ dist));
}

void BrdAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  fold_.fold_in(ex_, buf, count, t);
  for (int peer : peers_) ex_.swap_sum(buf, count, peer, t);
  fold_.fold_out(ex_, buf, count, t);
}

}  // namespace strata
