// Element-wise GPU kernels for the Caffe neuron layers (AbsVal, BNLL, Clip, ...; private to src/strata/layers):
// y[i] = f(x[i]) or f(a[i], b[i]) with a functor f whose operator() is __device__ (functors rather than
// __device__ lambdas, which may not live in the layers' protected members). y may be an input.
#pragma once

#include "strata/cuda.hpp"

namespace strata {
namespace neuron {

template <typename Dtype, typename F>
__global__ void map_kernel(long long n, const Dtype* x, Dtype* y, F f) {
  STRATA_KERNEL_LOOP(i, n) y[i] = f(x[i]);
}

template <typename Dtype, typename F>
__global__ void map_kernel(long long n, const Dtype* a, const Dtype* b, Dtype* y, F f) {
  STRATA_KERNEL_LOOP(i, n) y[i] = f(a[i], b[i]);
}

template <typename Dtype, typename F>
void gpu_map(int n, const Dtype* x, Dtype* y, F f) {
  if (n == 0) return;
  map_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y, f);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype, typename F>
void gpu_map(int n, const Dtype* a, const Dtype* b, Dtype* y, F f) {
  if (n == 0) return;
  map_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), a, b, y, f);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace neuron
}  // namespace strata
