#include "strata/layers/threshold_layer.hpp"

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ThresholdLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype t = threshold_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [t](Dtype x) { return Dtype(x > t); });
}

// The step's derivative: 0 (see the header).
template <typename Dtype>
void ThresholdLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  if (propagate_down[0]) cpu_set(bottom[0]->count(), Dtype(0), bottom[0]->mutable_cpu_diff());
}

STRATA_INSTANTIATE_CLASS(ThresholdLayer);
REGISTER_LAYER_CLASS(Threshold);

}  // namespace strata
