// BRB, binary-tree reduce then broadcast (seed paper 3.2.1, figure 2 left).
//
//   reduce:    a binomial tree towards rank 0. In round j (distance 2^j) every rank whose bit j is set
//              sends its partial sum to rank - 2^j and leaves; the receiver adds it to its own.
//   broadcast: the same tree backwards: rank 0's result flows out to everyone.
//
// 2 ceil(log2 N) phases, the whole message in each; rank 0 receives and sums log2 N messages and sends
// log2 N. The least total traffic, but piled on the root: good only for small messages on few ranks.
// Works for any N as is (the tree simply has missing leaves). Every element's final value is computed
// once, at rank 0, so all ranks end bit-identical.
#pragma once

#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_kernels.hpp"

namespace strata {

class BrbAllreduce : public Allreduce {
 public:
  BrbAllreduce(MPI_Comm comm, size_t segment_bytes = kDefaultSegmentBytes);
  std::string name() const override { return "brb"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

 private:
  int parent_ = -1;            // where this rank's partial sum goes (-1 at the root)
  std::vector<int> children_;  // whose partial sums arrive here, nearest first
  comm_detail::Exchange ex_;
};

}  // namespace strata
