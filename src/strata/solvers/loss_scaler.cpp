#include "strata/solvers/loss_scaler.hpp"

#include <cmath>

#include "strata/common.hpp"

namespace strata {

LossScaler::LossScaler(const LossScaleParameter& param) : param_(param), scale_(param.scale()) {}

bool LossScaler::AfterBackward(const std::string& not_finite, int iter) {
  if (!dynamic()) return true;
  if (not_finite.empty()) {
    if (++finite_iters_ >= param_.growth_interval()) {
      // A scale that would overflow float itself stays where it is (every gradient at it would be infinite anyway).
      const double grown = scale_ * param_.growth_factor();
      if (std::isfinite(static_cast<float>(grown))) scale_ = grown;
      finite_iters_ = 0;
    }
    return true;
  }
  STRATA_REQUIRE(scale_ > param_.min_scale())
      << not_finite << " is not finite at iteration " << iter << " at loss_scale.min_scale (" << param_.min_scale()
      << "): a smaller scale would not make it finite (a NaN or inf from the data or a layer); training stopped";
  const double lowered = std::max<double>(scale_ * param_.backoff_factor(), param_.min_scale());
  LOG(WARNING) << "Iteration " << iter << ": " << not_finite << " is not finite at loss scale " << scale_
               << "; the step is skipped and the scale lowered to " << lowered;
  scale_ = lowered;
  finite_iters_ = 0;
  return false;
}

void LossScaler::SaveState(SolverState* state) const {
  if (!dynamic()) return;
  state->set_loss_scale(static_cast<float>(scale_));
  state->set_loss_scale_finite_iters(finite_iters_);
}

void LossScaler::RestoreState(const SolverState& state, const std::string& origin) {
  if (!dynamic() || !state.has_loss_scale()) return;
  STRATA_REQUIRE(std::isfinite(state.loss_scale()) && state.loss_scale() > 0)
      << origin << " holds loss scale " << state.loss_scale() << "; it must be a positive number";
  scale_ = std::max<double>(state.loss_scale(), param_.min_scale());
  finite_iters_ = state.loss_scale_finite_iters() % std::max<uint32_t>(param_.growth_interval(), 1);
}

void CheckLossScale(const SolverParameter& param) {
  if (!param.has_loss_scale()) return;
  const LossScaleParameter& s = param.loss_scale();
  // The update multiplies by 1 / scale in float: that must be a number too.
  STRATA_REQUIRE(s.scale() > 0 && std::isfinite(1.0f / s.scale()))
      << "loss_scale.scale is " << s.scale() << "; it must be positive, and its reciprocal a float";
  if (!s.dynamic()) return;
  STRATA_REQUIRE(s.growth_factor() > 1) << "loss_scale.growth_factor is " << s.growth_factor()
                                        << "; it must be above 1";
  STRATA_REQUIRE(s.backoff_factor() > 0 && s.backoff_factor() < 1)
      << "loss_scale.backoff_factor is " << s.backoff_factor() << "; it must be between 0 and 1";
  STRATA_REQUIRE(s.growth_interval() >= 1) << "loss_scale.growth_interval must be at least 1";
  STRATA_REQUIRE(s.min_scale() > 0 && std::isfinite(1.0f / s.min_scale()) && s.min_scale() <= s.scale())
      << "loss_scale.min_scale is " << s.min_scale() << "; it must be positive, its reciprocal a float, and at most "
      << "loss_scale.scale (" << s.scale() << ")";
}

}  // namespace strata
