#include "strata/cuda.hpp"
#include "strata/layers/upsample_layer.hpp"

namespace strata {

namespace {

// One thread per output value: y[p, i, j] = x[p, i / 2, j / 2] over the (N * C) planes p.
template <typename Dtype>
__global__ void upsample_forward(long long n, int h, int w, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long j = k % (2 * w);
    const long long i = (k / (2 * w)) % (2 * h);
    const long long p = k / (4LL * h * w);
    y[k] = x[(p * h + i / 2) * w + j / 2];
  }
}

// One thread per input value: the sum of its 2 x 2 block of output gradients, added in the CPU's order.
template <typename Dtype>
__global__ void upsample_backward(long long n, int h, int w, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long j = k % w;
    const long long i = (k / w) % h;
    const long long p = k / (static_cast<long long>(h) * w);
    const Dtype* block = dy + (p * 2 * h + 2 * i) * 2 * w + 2 * j;
    dx[k] = block[0] + block[1] + block[2 * w] + block[2 * w + 1];
  }
}

}  // namespace

template <typename Dtype>
void UpsampleLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (n == 0) return;
  upsample_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->height(), bottom[0]->width(),
                                                        bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void UpsampleLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                        const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  upsample_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->height(), bottom[0]->width(),
                                                         top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(UpsampleLayer);

}  // namespace strata
