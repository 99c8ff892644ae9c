// Linear: every rank sends its buffer straight to rank 0, which sums them all in rank order and sends
// the result straight back: BRB with a tree of height one.
//
// Two phases whatever N is, so on a machine where ranks outnumber cores (every phase waits for the
// partner to be scheduled) it beats the log2 N phases of the trees and butterflies for small messages.
// Rank 0 receives and sums (N-1) M and sends (N-1) M: hopeless for large ones. The result is computed
// once, at rank 0, so all ranks end bit-identical.
#pragma once

#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_kernels.hpp"

namespace strata {

class LinearAllreduce : public Allreduce {
 public:
  explicit LinearAllreduce(MPI_Comm comm);
  std::string name() const override { return "linear"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

 private:
  void run_piece(void* buf, size_t count, DataType type);

  comm_detail::ScratchBuffer scratch_;  // rank 0: two receive slots
  std::vector<MPI_Request> reqs_;
};

}  // namespace strata
