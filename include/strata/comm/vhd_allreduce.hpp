// VHD, vector halving then vector doubling (seed paper 3.2.3, figure 2 right; Rabenseifner's algorithm).
//
//   reduce-scatter by vector halving: the buffer is cut into p blocks. In phase j the ranks 2^(k-1-j)
//     apart pair up; each keeps one half of the blocks it is still responsible for, sends the other half
//     to its partner and adds the partner's copy of the kept half. After log2 p phases virtual rank v
//     holds the finished sum of block v.
//   allgather by vector doubling: the same pairs in reverse order swap what they hold; the range each
//     rank holds doubles every phase until it is the whole buffer.
//
// 2 log2 p phases, at most 2 M moved and M summed per rank: the least traffic of the three, so the
// algorithm for large messages (phases with tiny halves cost latency on small ones). A non-power-of-two
// N is folded in and out (PowerOfTwoFold). Each element's final value is computed once, by the owner of
// its block, and copied: all ranks end bit-identical.
//
// "vhd" sends each half as one message; "vhd_seg" cuts messages into segments whose receive overlaps
// the sum of the previous one and whose scratch stays in cache (Exchange).
#pragma once

#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_kernels.hpp"

namespace strata {

class VhdAllreduce : public Allreduce {
 public:
  // segment_bytes = 0: whole messages ("vhd"); > 0: pipelined segments of that size ("vhd_seg").
  VhdAllreduce(MPI_Comm comm, size_t segment_bytes = 0);
  std::string name() const override { return segmented_ ? "vhd_seg" : "vhd"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

 private:
  // One halving phase as planned in the constructor, in blocks of the p-way split.
  struct Phase {
    int peer;                    // real rank of the partner
    int keep_begin, keep_end;    // blocks this rank keeps (and sums) in this phase
    int send_begin, send_end;    // blocks it hands to the partner
  };
  bool segmented_;
  comm_detail::PowerOfTwoFold fold_;
  std::vector<Phase> phases_;  // halving order; the doubling runs them backwards with roles swapped
  comm_detail::Exchange ex_;
};

}  // namespace strata
