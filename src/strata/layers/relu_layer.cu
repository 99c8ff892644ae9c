#include "strata/cuda.hpp"
#include "strata/layers/relu_layer.hpp"

#include "relu_device.cuh"

namespace strata {

namespace {

template <typename Dtype>
__global__ void relu_forward(long long n, const Dtype* x, Dtype* y, Dtype slope) {
  STRATA_KERNEL_LOOP(i, n) y[i] = relu_value(x[i], slope);
}

template <typename Dtype>
__global__ void relu_backward(long long n, const Dtype* s, const Dtype* dy, Dtype* dx, Dtype slope) {
  STRATA_KERNEL_LOOP(i, n) dx[i] = dy[i] * relu_gradient_factor(s[i], slope);
}

}  // namespace

template <typename Dtype>
void ReLULayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (n == 0) return;
  relu_forward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), bottom[0]->gpu_data(),
                                                    top[0]->mutable_gpu_data(), negative_slope_);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = negative_slope_;
  RequireBackwardNotInPlace(top, bottom);
  const int n = bottom[0]->count();
  if (n == 0) return;
  const Dtype* s = slope >= 0 ? top[0]->gpu_data() : bottom[0]->gpu_data();
  relu_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), s, top[0]->gpu_diff(),
                                                     bottom[0]->mutable_gpu_diff(), slope);
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ReLULayer);

}  // namespace strata
