#include "strata/layers/elu_layer.hpp"

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

template <typename Dtype>
void ELULayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype alpha = alpha_;
  // expm1 keeps the relative precision of alpha (e^x - 1) for x near 0. NaN stays NaN.
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [alpha](Dtype x) { return neuron::select(x > Dtype(0), x, alpha * neuron::expm1(x)); });
}

template <typename Dtype>
void ELULayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype alpha = alpha_;
  const int n = bottom[0]->count();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (alpha >= 0) {
    // y > 0 exactly where x > 0; elsewhere the slope alpha e^x is y + alpha.
    act::map(n, top[0]->cpu_data(), top[0]->cpu_diff(), dx,
             [alpha](Dtype y, Dtype dy) { return neuron::select(y > Dtype(0), Dtype(1), alpha + y) * dy; });
  } else {
    RequireOwnTopForBackward(bottom, top, this->describe());
    act::map(n, bottom[0]->cpu_data(), top[0]->cpu_diff(), dx,
             [alpha](Dtype x, Dtype dy) { return neuron::select(x > Dtype(0), Dtype(1), alpha * act::exp(x)) * dy; });
  }
}

STRATA_INSTANTIATE_CLASS(ELULayer);
REGISTER_LAYER_CLASS(ELU);

}  // namespace strata
