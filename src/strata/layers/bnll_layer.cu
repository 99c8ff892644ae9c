#include "neuron_map.cuh"
#include "strata/layers/bnll_layer.hpp"

namespace strata {

namespace {

// max(x, 0) + log(1 + e^-|x|), as on the CPU.
struct BNLLForward {
  template <typename Dtype>
  __device__ Dtype operator()(Dtype x) const { return (x > Dtype(0) ? x : Dtype(0)) + log1p(exp(-fabs(x))); }
};

// dy sigmoid(x) = dy (1 - e^-y).
struct BNLLBackward {
  template <typename Dtype>
  __device__ Dtype operator()(Dtype y, Dtype dy) const { return -expm1(-y) * dy; }
};

}  // namespace

template <typename Dtype>
void BNLLLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), BNLLForward{});
}

template <typename Dtype>
void BNLLLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  neuron::gpu_map(top[0]->count(), top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                  BNLLBackward{});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(BNLLLayer);

}  // namespace strata
