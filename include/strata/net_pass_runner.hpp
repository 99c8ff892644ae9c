// NetPassRunner: the seam through which something other than the plain layer loops runs a Net's forward and
// backward passes. Installed with Net::set_pass_runner, it receives every Net::Forward and Net::Backward (and so
// ForwardBackward, the solvers and the data-parallel engine, which keep calling those unchanged). A runner runs
// the layers through Net::RunLayerForward and Net::RunLayerBackward, so hooks fire as they do without it.
// The recompute executor (strata/recompute/executor.hpp) is one; Net knows nothing more of it than this.
#pragma once

namespace strata {

template <typename Dtype>
class Net;

template <typename Dtype>
class NetPassRunner {
 public:
  virtual ~NetPassRunner() = default;
  // One forward pass of `net`, the net the runner is installed on; returns the total weighted loss.
  virtual Dtype Forward(Net<Dtype>& net) = 0;
  // One backward pass of `net`.
  virtual void Backward(Net<Dtype>& net) = 0;
  // One backward pass that another follows on the same forward (Net::BackwardKeepingValues): a runner that frees
  // memory in Backward frees here only what it rebuilds in the next one.
  virtual void BackwardKeepingValues(Net<Dtype>& net) { Backward(net); }
};

}  // namespace strata
