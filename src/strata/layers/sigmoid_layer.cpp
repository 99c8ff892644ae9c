#include "strata/layers/sigmoid_layer.hpp"

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SigmoidLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [](Dtype x) { return act::sigmoid(x); });
}

template <typename Dtype>
void SigmoidLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  act::map(top[0]->count(), top[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [](Dtype y, Dtype dy) { return dy * y * (Dtype(1) - y); });
}

STRATA_INSTANTIATE_CLASS(SigmoidLayer);
REGISTER_LAYER_CLASS(Sigmoid);

}  // namespace strata
