#include "strata/cuda.hpp"
#include "strata/layers/tanh_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
__global__ void tanh_forward(long long n, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = tanh(x[i]);
}

template <typename Dtype>
__global__ void tanh_backward(long long n, const Dtype* y, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(i, n) dx[i] = dy[i] * (Dtype(1) - y[i] * y[i]);
}

}  // namespace

template <typename Dtype>
void TanHLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (n == 0) return;
  tanh_forward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), bottom[0]->gpu_data(),
                                                    top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void TanHLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  if (n == 0) return;
  tanh_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), top[0]->gpu_data(),
                                                     top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(TanHLayer);

}  // namespace strata
