#include "neuron_map.cuh"
#include "strata/layers/elu_layer.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

namespace {

template <typename Dtype>
struct ELUForward {
  Dtype alpha;
  __device__ Dtype operator()(Dtype x) const { return x > Dtype(0) ? x : alpha * expm1(x); }
};

// alpha >= 0, from the top: y > 0 exactly where x > 0, and alpha e^x = y + alpha elsewhere.
template <typename Dtype>
struct ELUBackwardFromTop {
  Dtype alpha;
  __device__ Dtype operator()(Dtype y, Dtype dy) const { return (y > Dtype(0) ? Dtype(1) : alpha + y) * dy; }
};

// alpha < 0, from the bottom.
template <typename Dtype>
struct ELUBackwardFromBottom {
  Dtype alpha;
  __device__ Dtype operator()(Dtype x, Dtype dy) const { return (x > Dtype(0) ? Dtype(1) : alpha * exp(x)) * dy; }
};

}  // namespace

template <typename Dtype>
void ELULayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), ELUForward<Dtype>{alpha_});
}

template <typename Dtype>
void ELULayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = bottom[0]->count();
  if (alpha_ >= 0) {
    neuron::gpu_map(n, top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                    ELUBackwardFromTop<Dtype>{alpha_});
  } else {
    RequireOwnTopForBackward(bottom, top, this->describe());
    neuron::gpu_map(n, bottom[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                    ELUBackwardFromBottom<Dtype>{alpha_});
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ELULayer);

}  // namespace strata
