#include "strata/comm/vhd_allreduce.hpp"

namespace strata {

using comm_detail::block_begin;
using comm_detail::at;

VhdAllreduce::VhdAllreduce(MPI_Comm comm, size_t segment_bytes)
    : Allreduce(comm), segmented_(segment_bytes > 0), fold_(rank_, size_), ex_(comm, segment_bytes) {
  if (fold_.extra) return;
  int lo = 0, hi = fold_.p;
  for (int dist = fold_.p / 2; dist >= 1; dist /= 2) {
    int mid = (lo + hi) / 2;
    Phase ph;
    ph.peer = fold_.real_rank(fold_.vrank ^ dist);
    if (fold_.vrank & dist) {
      ph.keep_begin = mid, ph.keep_end = hi, ph.send_begin = lo, ph.send_end = mid;
    } else {
      ph.keep_begin = lo, ph.keep_end = mid, ph.send_begin = mid, ph.send_end = hi;
    }
    phases_.push_back(ph);
    lo = ph.keep_begin, hi = ph.keep_end;
  }
}

void VhdAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  const size_t p = fold_.p;
  auto elem = [&](int block) { return block_begin(block, p, count); };
  fold_.fold_in(ex_, buf, count, t);
  // Reduce-scatter: my kept half gains the partner's contribution; the other half goes to the partner.
  for (const Phase& ph : phases_) {
    size_t kb = elem(ph.keep_begin), ke = elem(ph.keep_end);
    size_t sb = elem(ph.send_begin), se = elem(ph.send_end);
    ex_.send_recv_sum(at(buf, sb, t), se - sb, ph.peer, at(buf, kb, t), ke - kb, ph.peer, t);
  }
  // Allgather: backwards through the same pairs; I send the finished range I kept, and receive the
  // range I gave away, which the partner has finished.
  for (auto it = phases_.rbegin(); it != phases_.rend(); ++it) {
    size_t kb = elem(it->keep_begin), ke = elem(it->keep_end);
    size_t sb = elem(it->send_begin), se = elem(it->send_end);
    ex_.send_recv(at(buf, kb, t), ke - kb, it->peer, at(buf, sb, t), se - sb, it->peer, t);
  }
  fold_.fold_out(ex_, buf, count, t);
}

}  // namespace strata
