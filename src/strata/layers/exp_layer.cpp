#include "strata/layers/exp_layer.hpp"

#include <cmath>

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ExpLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ExpParameter& p = this->layer_param_.exp_param();
  // Computed in double, then rounded: base^shift and ln(base) for float come out correctly rounded.
  const double base = p.base(), scale = p.scale(), shift = p.shift();
  STRATA_REQUIRE(base == -1 || base > 0)
      << this->describe() << ": exp_param.base must be positive, or -1 for e; got " << base;
  const double log_base = base == -1 ? 1.0 : std::log(base);
  STRATA_REQUIRE(std::isfinite(log_base)) << this->describe() << ": ln(exp_param.base) = ln(" << base << ") = "
                                          << log_base << " is not finite";
  inner_scale_ = static_cast<Dtype>(log_base * scale);
  outer_scale_ = static_cast<Dtype>(shift == 0 ? 1.0 : base == -1 ? std::exp(shift) : std::pow(base, shift));
}

template <typename Dtype>
void ExpLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype inner = inner_scale_, outer = outer_scale_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [inner, outer](Dtype x) { return outer * act::exp(inner * x); });
}

template <typename Dtype>
void ExpLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype inner = inner_scale_;
  act::map(top[0]->count(), top[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [inner](Dtype y, Dtype dy) { return y * dy * inner; });
}

STRATA_INSTANTIATE_CLASS(ExpLayer);
REGISTER_LAYER_CLASS(Exp);

}  // namespace strata
