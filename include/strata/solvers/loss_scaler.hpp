// The loss scale of solver loss_scale { } (docs/caffe.md, "Loss scaling"): the factor backward starts from, and,
// when dynamic, how it follows the gradients: lowered (and the iteration skipped) when one is not finite, raised
// after growth_interval finite iterations in a row. The Optimizer owns one and asks it after every reduced backward.
#pragma once

#include <cstdint>
#include <string>

#include "strata/proto/strata.pb.h"

namespace strata {

class LossScaler {
 public:
  explicit LossScaler(const LossScaleParameter& param);

  double scale() const { return scale_; }
  bool dynamic() const { return param_.dynamic(); }
  // Whether backward is scaled at all (a scale other than 1, or one that may change).
  bool active() const { return dynamic() || scale_ != 1; }

  // After iteration `iter`'s backward, scaled by scale(): what of it is not finite ("the gradient", "a statistic
  // of the KFAC stage"), or "" when all of it is. Returns whether the update may use it; false (a dynamic scale and
  // something not finite) lowers the scale, logged. Something not finite at min_scale ends the run with an Error:
  // lowering the scale further would not make it finite.
  bool AfterBackward(const std::string& not_finite, int iter);

  // The dynamic scale's state (a solverstate's loss_scale fields), so that a resumed run scales as the
  // uninterrupted one would; a state without them (Caffe's, a static scale's) leaves the solver's first scale.
  void SaveState(SolverState* state) const;
  void RestoreState(const SolverState& state, const std::string& origin);

 private:
  LossScaleParameter param_;
  double scale_;
  uint32_t finite_iters_ = 0;  // finite iterations in a row since the scale last changed
};

// The solver's loss_scale settings before the first iteration (setting_checks.hpp): an Error naming the field.
void CheckLossScale(const SolverParameter& param);

}  // namespace strata
