// Ring: reduce-scatter then allgather around a ring of all N ranks (the NCCL/Horovod baseline).
//
//   reduce-scatter: the buffer is cut into N blocks. In step s (s = 0 .. N-2) rank r sends block r-s to
//     rank r+1 and adds block r-s-1 arriving from rank r-1 into its own copy. After N-1 steps rank r
//     holds the finished sum of block r+1.
//   allgather: N-1 more steps pass the finished blocks on around the same ring.
//
// 2(N-1) phases; each rank moves 2 M (N-1)/N and sums M (N-1)/N, the minimum, spread evenly over all
// ranks and links, and needs no power of two. Many phases, so it is for large messages. Each block's
// final value is computed once, by its owner, and copied: all ranks end bit-identical.
//
// "ring" sends each block as one message; "ring_seg" (the chunked variant) cuts them into segments so
// that the receive of one overlaps the sum of the previous one and the scratch stays in cache.
#pragma once

#include <string>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_kernels.hpp"

namespace strata {

class RingAllreduce : public Allreduce {
 public:
  // segment_bytes = 0: one message per block and step ("ring"); > 0: segments ("ring_seg").
  RingAllreduce(MPI_Comm comm, size_t segment_bytes = 0);
  std::string name() const override { return segmented_ ? "ring_seg" : "ring"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

 private:
  bool segmented_;
  int next_, prev_;
  comm_detail::Exchange ex_;
};

}  // namespace strata
