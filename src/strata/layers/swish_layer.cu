#include "neuron_map.cuh"
#include "strata/layers/swish_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
struct SwishForward {
  Dtype beta;
  __device__ Dtype operator()(Dtype x) const { return x * (Dtype(1) / (Dtype(1) + exp(-beta * x))); }
};

// s = sigmoid(beta x) again; dy (s + beta y (1 - s)), as on the CPU.
template <typename Dtype>
struct SwishBackward {
  Dtype beta;
  __device__ Dtype operator()(Dtype x, Dtype dy) const {
    const Dtype s = Dtype(1) / (Dtype(1) + exp(-beta * x));
    const Dtype by = beta * (x * s);
    return dy * (s + by * (Dtype(1) - s));
  }
};

}  // namespace

template <typename Dtype>
void SwishLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  input_.KeepGpu(*bottom[0], bottom[0] == top[0]);
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), SwishForward<Dtype>{beta_});
}

template <typename Dtype>
void SwishLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  neuron::gpu_map(bottom[0]->count(), input_.gpu_input(*bottom[0], bottom[0] == top[0]), top[0]->gpu_diff(),
                  bottom[0]->mutable_gpu_diff(), SwishBackward<Dtype>{beta_});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SwishLayer);

}  // namespace strata
