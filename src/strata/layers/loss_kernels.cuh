// The GPU side of the loss layers' shared pieces (loss_terms.hpp): the sum of a loss's terms over positions, and an
// element-wise launch for their backward. Both take __device__ lambdas, so they are called from free functions
// (nvcc allows device lambdas only in functions with public access). Private to src/strata/layers.
#pragma once

#include <algorithm>
#include <climits>

#include "loss_terms.hpp"
#include "strata/cuda.hpp"

namespace strata {
namespace loss {
namespace detail {

// Blocks of the sum's first pass: enough to fill the GPU, few enough for one thread to add their partials.
constexpr int kSumBlocks = 512;

struct DeviceTotals {
  double value;
  double counted;
  unsigned long long first_bad;
};

// Each block's (sum, count) over its grid-stride share of the positions; bad labels lower *first_bad.
template <typename F>
__global__ void sum_partials(long long n, F term, double2* partial, unsigned long long* first_bad) {
  __shared__ double value[cuda::kThreads], count[cuda::kThreads];
  double v = 0, c = 0;
  STRATA_KERNEL_LOOP(k, n) {
    const Term t = term(k);
    if (t.status == kCounted) {
      v += t.value;
      c += 1;
    } else if (t.status == kBadLabel) {
      atomicMin(first_bad, static_cast<unsigned long long>(k));
    }
  }
  value[threadIdx.x] = v;
  count[threadIdx.x] = c;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      value[threadIdx.x] += value[threadIdx.x + w];
      count[threadIdx.x] += count[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = make_double2(value[0], count[0]);
}

// The partials added in block order: the same bits on every run. (static: each .cu file has its own copy.)
static __global__ void sum_finish(int blocks, const double2* partial, DeviceTotals* totals) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double v = 0, c = 0;
  for (int b = 0; b < blocks; ++b) {
    v += partial[b].x;
    c += partial[b].y;
  }
  totals->value = v;
  totals->counted = c;
}

template <typename F>
__global__ void for_each_kernel(long long n, F f) {
  STRATA_KERNEL_LOOP(k, n) f(k);
}

}  // namespace detail

// The GPU's sum of term(k) over [0, n) (term: a __device__ lambda returning a Term), deterministic, in double.
// Uses the calling thread's workspace; returns to the host.
template <typename F>
Totals gpu_sum_terms(long long n, F term) {
  Totals totals;
  if (n <= 0) return totals;
  const int blocks = std::min(cuda::blocks(n), detail::kSumBlocks);
  // The workspace holds the partials (16-byte aligned at its start), then the totals.
  char* ws = static_cast<char*>(cuda::workspace(blocks * sizeof(double2) + sizeof(detail::DeviceTotals)));
  double2* partial = reinterpret_cast<double2*>(ws);
  detail::DeviceTotals* device_totals = reinterpret_cast<detail::DeviceTotals*>(ws + blocks * sizeof(double2));
  STRATA_CUDA_CHECK(cudaMemset(&device_totals->first_bad, 0xff, sizeof(unsigned long long)));
  detail::sum_partials<<<blocks, cuda::kThreads>>>(n, term, partial, &device_totals->first_bad);
  STRATA_CUDA_KERNEL_CHECK();
  detail::sum_finish<<<1, 1>>>(blocks, partial, device_totals);
  STRATA_CUDA_KERNEL_CHECK();
  detail::DeviceTotals host;
  STRATA_CUDA_CHECK(cudaMemcpy(&host, device_totals, sizeof host, cudaMemcpyDeviceToHost));
  totals.value = host.value;
  totals.counted = static_cast<long long>(host.counted + 0.5);
  if (host.first_bad != ~0ULL) totals.first_bad = static_cast<long long>(host.first_bad);
  return totals;
}

// f(k) for every k in [0, n), f a __device__ lambda.
template <typename F>
void gpu_for_each(long long n, F f) {
  if (n <= 0) return;
  detail::for_each_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, f);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace loss
}  // namespace strata
