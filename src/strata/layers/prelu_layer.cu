#include "channel_reduce.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/prelu_layer.hpp"

namespace strata {

namespace {

// The slope of element k: its channel's, or slope[0] when shared.
__device__ inline int slope_index(long long k, int channels, int inner, bool shared) {
  return shared ? 0 : static_cast<int>((k / inner) % channels);
}

template <typename Dtype>
__global__ void prelu_forward(long long n, int channels, int inner, bool shared, const Dtype* x, const Dtype* slope,
                              Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const Dtype v = x[k];
    y[k] = v > Dtype(0) ? v : slope[slope_index(k, channels, inner, shared)] * v;
  }
}

// Caffe's form, as on the CPU: a NaN input gets gradient 0.
template <typename Dtype>
__global__ void prelu_backward(long long n, int channels, int inner, bool shared, const Dtype* x, const Dtype* dy,
                               const Dtype* slope, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const Dtype v = x[k];
    dx[k] = dy[k] * (Dtype(v > Dtype(0)) + slope[slope_index(k, channels, inner, shared)] * Dtype(v <= Dtype(0)));
  }
}

// diff[c] += the sum of x dy over the x <= 0 of channel c (over the whole blob into diff[0] when shared), in
// double with a fixed order (channel_reduce).
template <typename Dtype>
void prelu_slope_gradient(int outer, int channels, int inner, bool shared, const Dtype* x, const Dtype* dy,
                          Dtype* diff) {
  const long long n = static_cast<long long>(outer) * channels * inner;
  if (n == 0) return;
  auto term = [=] __device__(long long k, int) {
    return make_double2(static_cast<double>(x[k] * Dtype(x[k] <= Dtype(0)) * dy[k]), 0.0);
  };
  auto add = [=] __device__(int c, double sum, double) { diff[c] += static_cast<Dtype>(sum); };
  if (shared) {
    channel_reduce(1, 1, static_cast<int>(n), term, add);
  } else {
    channel_reduce(outer, channels, inner, term, add);
  }
}

}  // namespace

template <typename Dtype>
void PReLULayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  input_.KeepGpu(*bottom[0], bottom[0] == top[0]);
  const int n = bottom[0]->count();
  if (n == 0) return;
  prelu_forward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), channels_, inner_, channel_shared_,
                                                     bottom[0]->gpu_data(), this->blobs_[0]->gpu_data(),
                                                     top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void PReLULayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const Dtype* x = input_.gpu_input(*bottom[0], bottom[0] == top[0]);
  const Dtype* dy = top[0]->gpu_diff();
  // The slopes' gradient first: in place, writing the bottom's diff overwrites the top's.
  if (this->param_propagate_down(0)) {
    prelu_slope_gradient(outer_, channels_, inner_, channel_shared_, x, dy, this->blobs_[0]->mutable_gpu_diff());
  }
  const int n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  prelu_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), channels_, inner_, channel_shared_,
                                                      x, dy, this->blobs_[0]->gpu_data(),
                                                      bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(PReLULayer);

}  // namespace strata
