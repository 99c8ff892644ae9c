#include "neuron_map.cuh"
#include "strata/layers/threshold_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
struct ThresholdForward {
  Dtype t;
  __device__ Dtype operator()(Dtype x) const { return Dtype(x > t); }
};

}  // namespace

template <typename Dtype>
void ThresholdLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(),
                  ThresholdForward<Dtype>{threshold_});
}

// The step's derivative: 0 (see the header).
template <typename Dtype>
void ThresholdLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  if (propagate_down[0]) gpu_set(bottom[0]->count(), Dtype(0), bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ThresholdLayer);

}  // namespace strata
