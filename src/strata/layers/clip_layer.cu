#include "neuron_map.cuh"
#include "strata/layers/clip_layer.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

namespace {

// NaN passes through, as on the CPU (fmin/fmax would drop it).
template <typename Dtype>
struct ClipForward {
  Dtype lo, hi;
  __device__ Dtype operator()(Dtype x) const { return x < lo ? lo : (x > hi ? hi : x); }
};

template <typename Dtype>
struct ClipBackward {
  Dtype lo, hi;
  __device__ Dtype operator()(Dtype x, Dtype dy) const { return Dtype(x >= lo && x <= hi) * dy; }
};

}  // namespace

template <typename Dtype>
void ClipLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(),
                  ClipForward<Dtype>{min_, max_});
}

template <typename Dtype>
void ClipLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                  ClipBackward<Dtype>{min_, max_});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ClipLayer);

}  // namespace strata
