#include "neuron_map.cuh"
#include "strata/layers/absval_layer.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

namespace {

struct AbsForward {
  template <typename Dtype>
  __device__ Dtype operator()(Dtype x) const { return fabs(x); }
};

// sign(x) dy with sign(0) = sign(NaN) = 0, as on the CPU.
struct AbsBackward {
  template <typename Dtype>
  __device__ Dtype operator()(Dtype x, Dtype dy) const { return (Dtype(x > Dtype(0)) - Dtype(x < Dtype(0))) * dy; }
};

}  // namespace

template <typename Dtype>
void AbsValLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), AbsForward{});
}

template <typename Dtype>
void AbsValLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                  AbsBackward{});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(AbsValLayer);

}  // namespace strata
