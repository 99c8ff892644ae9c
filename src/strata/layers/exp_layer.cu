#include "neuron_map.cuh"
#include "strata/layers/exp_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
struct ExpForward {
  Dtype inner, outer;
  __device__ Dtype operator()(Dtype x) const { return outer * exp(inner * x); }
};

template <typename Dtype>
struct ExpBackward {
  Dtype inner;
  __device__ Dtype operator()(Dtype y, Dtype dy) const { return y * dy * inner; }
};

}  // namespace

template <typename Dtype>
void ExpLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(),
                  ExpForward<Dtype>{inner_scale_, outer_scale_});
}

template <typename Dtype>
void ExpLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  neuron::gpu_map(top[0]->count(), top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                  ExpBackward<Dtype>{inner_scale_});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ExpLayer);

}  // namespace strata
