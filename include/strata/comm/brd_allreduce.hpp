// BRD, butterfly recursive doubling (seed paper 3.2.2, figure 2 middle).
//
// In phase j (j = 0 .. log2 N - 1) every rank swaps its whole buffer with the rank 2^j away
// (rank XOR 2^j) and adds what it receives. After log2 N phases everyone holds the sum.
//
// The fewest phases (log2 N), so the least latency: the algorithm for small messages. But every phase
// moves and sums the whole message, M log2 N per rank. A non-power-of-two N is folded in and out
// (PowerOfTwoFold): two extra phases for the ranks involved.
// Bit-identical: in each phase both partners compute x + y from the same two operands, and IEEE
// addition is commutative, so they stay equal; folded-out ranks receive a copy.
#pragma once

#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_kernels.hpp"

namespace strata {

class BrdAllreduce : public Allreduce {
 public:
  BrdAllreduce(MPI_Comm comm, size_t segment_bytes = kDefaultSegmentBytes);
  std::string name() const override { return "brd"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

 private:
  comm_detail::PowerOfTwoFold fold_;
  std::vector<int> peers_;  // partner in each phase (real ranks), empty for folded-out ranks
  comm_detail::Exchange ex_;
};

}  // namespace strata
