#include "strata/layers/absval_layer.hpp"

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

template <typename Dtype>
void AbsValLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [](Dtype x) { return std::fabs(x); });
}

template <typename Dtype>
void AbsValLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  // sign(x) dy, with sign(0) = sign(NaN) = 0 (Caffe's caffe_cpu_sign).
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [](Dtype x, Dtype dy) { return (Dtype(x > Dtype(0)) - Dtype(x < Dtype(0))) * dy; });
}

STRATA_INSTANTIATE_CLASS(AbsValLayer);
REGISTER_LAYER_CLASS(AbsVal);

}  // namespace strata
