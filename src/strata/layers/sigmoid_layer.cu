#include "strata/cuda.hpp"
#include "strata/layers/sigmoid_layer.hpp"

namespace strata {

namespace {

// 1 / (1 + e^-x), the CPU's form: no cancellation, full relative precision in both tails.
template <typename Dtype>
__global__ void sigmoid_forward(long long n, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = Dtype(1) / (Dtype(1) + exp(-x[i]));
}

template <typename Dtype>
__global__ void sigmoid_backward(long long n, const Dtype* y, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(i, n) dx[i] = dy[i] * y[i] * (Dtype(1) - y[i]);
}

}  // namespace

template <typename Dtype>
void SigmoidLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (n == 0) return;
  sigmoid_forward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), bottom[0]->gpu_data(),
                                                       top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void SigmoidLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  if (n == 0) return;
  sigmoid_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), top[0]->gpu_data(),
                                                        top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SigmoidLayer);

}  // namespace strata
