#include "strata/layers/bnll_layer.hpp"

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void BNLLLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  // max(x, 0) + log(1 + e^-|x|): Caffe's two branches in one expression. NaN stays NaN.
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(), [](Dtype x) {
    return neuron::select(x > Dtype(0), x, Dtype(0)) + neuron::log1p(act::exp(-std::fabs(x)));
  });
}

template <typename Dtype>
void BNLLLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  // dy sigmoid(x), with sigmoid(x) = 1 - e^-y = -expm1(-y) (y >= 0), accurate in both tails.
  act::map(top[0]->count(), top[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [](Dtype y, Dtype dy) { return -neuron::expm1(-y) * dy; });
}

STRATA_INSTANTIATE_CLASS(BNLLLayer);
REGISTER_LAYER_CLASS(BNLL);

}  // namespace strata
