// The SGD family's per-parameter updates on the GPU: one pass over gradient and history each, the same
// formulas as the CPU loops in sgd_optimizers.cpp.
#include "strata/cuda.hpp"

namespace strata {

namespace {

template <typename Dtype>
__global__ void sgd_kernel(long long n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr) {
  STRATA_KERNEL_LOOP(i, n) {
    const Dtype v = momentum * h[i] + lr * g[i];
    h[i] = v;
    g[i] = v;
  }
}

template <typename Dtype>
__global__ void nesterov_kernel(long long n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr) {
  STRATA_KERNEL_LOOP(i, n) {
    const Dtype previous = h[i];
    const Dtype v = momentum * previous + lr * g[i];
    h[i] = v;
    g[i] = (1 + momentum) * v - momentum * previous;
  }
}

// AdaGrad (decay 1, weight 1) and RMSProp (decay rms_decay, weight 1 - rms_decay).
template <typename Dtype>
__global__ void adaptive_rate_kernel(long long n, Dtype* g, Dtype* h, Dtype decay, Dtype weight, Dtype delta,
                                     Dtype lr) {
  STRATA_KERNEL_LOOP(i, n) {
    const Dtype gi = g[i];
    const Dtype hi = decay * h[i] + weight * gi * gi;
    h[i] = hi;
    g[i] = lr * gi / (sqrt(hi) + delta);
  }
}

template <typename Dtype>
__global__ void adadelta_kernel(long long n, Dtype* g, Dtype* h, Dtype* d, Dtype m, Dtype delta, Dtype lr) {
  STRATA_KERNEL_LOOP(i, n) {
    const Dtype gi = g[i];
    const Dtype hi = m * h[i] + (1 - m) * gi * gi;
    const Dtype u = sqrt((d[i] + delta) / (hi + delta)) * gi;
    h[i] = hi;
    d[i] = m * d[i] + (1 - m) * u * u;
    g[i] = lr * u;
  }
}

template <typename Dtype>
__global__ void adam_kernel(long long n, Dtype* g, Dtype* m, Dtype* s, Dtype b1, Dtype b2, Dtype eps, Dtype step) {
  STRATA_KERNEL_LOOP(i, n) {
    const Dtype gi = g[i];
    const Dtype mi = b1 * m[i] + (1 - b1) * gi;
    const Dtype si = b2 * s[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    s[i] = si;
    g[i] = step * mi / (sqrt(si) + eps);
  }
}

}  // namespace

template <typename Dtype>
void sgd_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr) {
  if (n <= 0) return;
  sgd_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), g, h, momentum, lr);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void nesterov_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr) {
  if (n <= 0) return;
  nesterov_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), g, h, momentum, lr);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void adaptive_rate_update_gpu(int n, Dtype* g, Dtype* h, Dtype decay, Dtype weight, Dtype delta, Dtype lr) {
  if (n <= 0) return;
  adaptive_rate_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), g, h, decay, weight, delta,
                                                            lr);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void adadelta_update_gpu(int n, Dtype* g, Dtype* h, Dtype* d, Dtype momentum, Dtype delta, Dtype lr) {
  if (n <= 0) return;
  adadelta_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), g, h, d, momentum, delta, lr);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void adam_update_gpu(int n, Dtype* g, Dtype* m, Dtype* s, Dtype b1, Dtype b2, Dtype eps, Dtype step) {
  if (n <= 0) return;
  adam_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), g, m, s, b1, b2, eps, step);
  STRATA_CUDA_KERNEL_CHECK();
}

template void sgd_update_gpu<float>(int, float*, float*, float, float);
template void sgd_update_gpu<double>(int, double*, double*, double, double);
template void nesterov_update_gpu<float>(int, float*, float*, float, float);
template void nesterov_update_gpu<double>(int, double*, double*, double, double);
template void adaptive_rate_update_gpu<float>(int, float*, float*, float, float, float, float);
template void adaptive_rate_update_gpu<double>(int, double*, double*, double, double, double, double);
template void adadelta_update_gpu<float>(int, float*, float*, float*, float, float, float);
template void adadelta_update_gpu<double>(int, double*, double*, double*, double, double, double);
template void adam_update_gpu<float>(int, float*, float*, float*, float, float, float, float);
template void adam_update_gpu<double>(int, double*, double*, double*, double, double, double, double);

}  // namespace strata
