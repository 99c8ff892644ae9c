#include "neuron_map.cuh"
#include "strata/layers/log_layer.hpp"
#include "strata/layers/neuron_input.hpp"

namespace strata {

namespace {

template <typename Dtype>
struct LogForward {
  Dtype scale, shift, base_scale;
  __device__ Dtype operator()(Dtype x) const { return log(x * scale + shift) * base_scale; }
};

template <typename Dtype>
struct LogBackward {
  Dtype scale, shift, num;
  __device__ Dtype operator()(Dtype x, Dtype dy) const { return num / (x * scale + shift) * dy; }
};

}  // namespace

template <typename Dtype>
void LogLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->mutable_gpu_data(),
                  LogForward<Dtype>{input_scale_, input_shift_, base_scale_});
}

template <typename Dtype>
void LogLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  RequireOwnTopForBackward(bottom, top, this->describe());
  neuron::gpu_map(bottom[0]->count(), bottom[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(),
                  LogBackward<Dtype>{input_scale_, input_shift_, backward_num_scale_});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(LogLayer);

}  // namespace strata
