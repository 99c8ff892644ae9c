#include "neuron_map.cuh"
#include "strata/layers/neuron_input.hpp"
#include "strata/layers/power_layer.hpp"

namespace strata {

namespace {

// (shift + scale x)^power; power 1 and 2 as plain arithmetic, as on the CPU.
template <typename Dtype>
struct PowerForward {
  Dtype power, scale, shift;
  __device__ Dtype operator()(Dtype x) const {
    const Dtype b = x * scale + shift;
    return power == Dtype(1) ? b : power == Dtype(2) ? b * b : pow(b, power);
  }
};

// dy power scale (shift + scale x)^(power - 1), for power != 1.
template <typename Dtype>
struct PowerBackward {
  Dtype power, scale, shift, diff_scale;
  __device__ Dtype operator()(Dtype x, Dtype dy) const {
    const Dtype b = x * scale + shift;
    return diff_scale * (power == Dtype(2) ? b : pow(b, power - Dtype(1))) * dy;
  }
};

template <typename Dtype>
struct ScaleBy {
  Dtype s;
  __device__ Dtype operator()(Dtype g) const { return s * g; }
};

}  // namespace

template <typename Dtype>
void PowerLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (constant_output()) {
    gpu_set(n, constant_value(), top[0]->mutable_gpu_data());
    return;
  }
  neuron::gpu_map(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), PowerForward<Dtype>{power_, scale_, shift_});
}

template <typename Dtype>
void PowerLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = bottom[0]->count();
  Dtype* dx = bottom[0]->mutable_gpu_diff();
  if (constant_output()) {
    gpu_set(n, Dtype(0), dx);
    return;
  }
  if (power_ == Dtype(1)) {
    neuron::gpu_map(n, top[0]->gpu_diff(), dx, ScaleBy<Dtype>{diff_scale_});
    return;
  }
  RequireOwnTopForBackward(bottom, top, this->describe());
  neuron::gpu_map(n, bottom[0]->gpu_data(), top[0]->gpu_diff(), dx,
                  PowerBackward<Dtype>{power_, scale_, shift_, diff_scale_});
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(PowerLayer);

}  // namespace strata
