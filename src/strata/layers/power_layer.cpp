#include "strata/layers/power_layer.hpp"

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

template <typename Dtype>
void PowerLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  Dtype* y = top[0]->mutable_cpu_data();
  if (constant_output()) {
    cpu_set(n, constant_value(), y);
    return;
  }
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype power = power_, scale = scale_, shift = shift_;
  if (power == Dtype(1)) {
    act::map(n, x, y, [=](Dtype v) { return v * scale + shift; });
  } else if (power == Dtype(2)) {
    act::map(n, x, y, [=](Dtype v) {
      const Dtype b = v * scale + shift;
      return b * b;
    });
  } else {
    act::map(n, x, y, [=](Dtype v) { return std::pow(v * scale + shift, power); });
  }
}

template <typename Dtype>
void PowerLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = bottom[0]->count();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const Dtype* dy = top[0]->cpu_diff();
  const Dtype power = power_, scale = scale_, shift = shift_, diff_scale = diff_scale_;
  if (constant_output()) {
    cpu_set(n, Dtype(0), dx);
    return;
  }
  if (power == Dtype(1)) {
    act::map(n, dy, dx, [=](Dtype g) { return diff_scale * g; });
    return;
  }
  RequireOwnTopForBackward(bottom, top, this->describe());
  const Dtype* x = bottom[0]->cpu_data();
  if (power == Dtype(2)) {
    act::map(n, x, dy, dx, [=](Dtype v, Dtype g) { return diff_scale * (v * scale + shift) * g; });
  } else {
    act::map(n, x, dy, dx,
             [=](Dtype v, Dtype g) { return diff_scale * std::pow(v * scale + shift, power - Dtype(1)) * g; });
  }
}

STRATA_INSTANTIATE_CLASS(PowerLayer);
REGISTER_LAYER_CLASS(Power);

}  // namespace strata
