#include "strata/layers/log_layer.hpp"

#include <cmath>

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

template <typename Dtype>
void LogLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LogParameter& p = this->layer_param_.log_param();
  const double base = p.base();
  STRATA_REQUIRE(base == -1 || base > 0)
      << this->describe() << ": log_param.base must be positive, or -1 for e; got " << base;
  const double log_base = base == -1 ? 1.0 : std::log(base);
  // Also refuses base 1 (ln 1 = 0), whose logarithm does not exist.
  STRATA_REQUIRE(std::isfinite(log_base) && std::isfinite(1.0 / log_base))
      << this->describe() << ": log_param.base " << base << " has no usable logarithm (1 / ln(base) = "
      << 1.0 / log_base << ")";
  base_scale_ = static_cast<Dtype>(1.0 / log_base);
  input_scale_ = static_cast<Dtype>(p.scale());
  input_shift_ = static_cast<Dtype>(p.shift());
  backward_num_scale_ = static_cast<Dtype>(p.scale() / log_base);
}

template <typename Dtype>
void LogLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype scale = input_scale_, shift = input_shift_, base_scale = base_scale_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [=](Dtype x) { return neuron::log(x * scale + shift) * base_scale; });
}

template <typename Dtype>
void LogLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  const Dtype scale = input_scale_, shift = input_shift_, num = backward_num_scale_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [=](Dtype x, Dtype dy) { return num / (x * scale + shift) * dy; });
}

STRATA_INSTANTIATE_CLASS(LogLayer);
REGISTER_LAYER_CLASS(Log);

}  // namespace strata
