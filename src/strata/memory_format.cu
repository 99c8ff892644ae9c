// The device's conversions between float and bfloat16 (memory_format.hpp): one thread per value, with the
// rounding the CPU's reference uses (to_bf16).
#include "strata/cuda.hpp"
#include "strata/memory_format.hpp"

namespace strata {

namespace {

__global__ void to_bf16_kernel(long long n, const float* x, bfloat16* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = to_bf16(x[i]);
}

__global__ void from_bf16_kernel(long long n, const bfloat16* x, float* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = from_bf16(x[i]);
}

}  // namespace

void gpu_to_bf16(size_t n, const float* x, bfloat16* y) {
  if (n == 0) return;
  to_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_from_bf16(size_t n, const bfloat16* x, float* y) {
  if (n == 0) return;
  from_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace strata
