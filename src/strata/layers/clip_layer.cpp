#include "strata/layers/clip_layer.hpp"

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

template <typename Dtype>
void ClipLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ClipParameter& p = this->layer_param_.clip_param();
  STRATA_REQUIRE(p.has_min() && p.has_max())
      << this->describe() << " needs clip_param { min: ... max: ... }";
  STRATA_REQUIRE(p.min() <= p.max()) << this->describe() << ": clip_param.min (" << p.min()
                                     << ") must not exceed clip_param.max (" << p.max() << ")";
  min_ = static_cast<Dtype>(p.min());
  max_ = static_cast<Dtype>(p.max());
}

template <typename Dtype>
void ClipLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype lo = min_, hi = max_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [lo, hi](Dtype x) { return neuron::select(x < lo, lo, neuron::select(x > hi, hi, x)); });
}

template <typename Dtype>
void ClipLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  const Dtype lo = min_, hi = max_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
           [lo, hi](Dtype x, Dtype dy) { return Dtype((x >= lo) & (x <= hi)) * dy; });
}

STRATA_INSTANTIATE_CLASS(ClipLayer);
REGISTER_LAYER_CLASS(Clip);

}  // namespace strata
