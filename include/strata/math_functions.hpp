// The numeric kernels layers are written in: BLAS through OpenBLAS's CBLAS, plus the element-wise loops
// BLAS lacks. Names follow BLAS; every function exists for float and double.
#pragma once

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "strata/common.hpp"

namespace strata {

// C = alpha * op(A) * op(B) + beta * C, row-major; A is MxK, B is KxN after op.
template <typename Dtype>
void cpu_gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N, int K, Dtype alpha, const Dtype* A,
              const Dtype* B, Dtype beta, Dtype* C);
// y = alpha * op(A) * x + beta * y; A is MxN.
template <typename Dtype>
void cpu_gemv(CBLAS_TRANSPOSE trans_a, int M, int N, Dtype alpha, const Dtype* A, const Dtype* x, Dtype beta,
              Dtype* y);
template <typename Dtype>
void cpu_axpy(int n, Dtype alpha, const Dtype* x, Dtype* y);
// y = alpha * x + beta * y
template <typename Dtype>
void cpu_axpby(int n, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y);
template <typename Dtype>
void cpu_scal(int n, Dtype alpha, Dtype* x);
template <typename Dtype>
Dtype cpu_dot(int n, const Dtype* x, const Dtype* y);
template <typename Dtype>
Dtype cpu_strided_dot(int n, const Dtype* x, int incx, const Dtype* y, int incy);
template <typename Dtype>
Dtype cpu_asum(int n, const Dtype* x);
// Whether none of the n values is inf or NaN (a sum of their absolute values can overflow where none is).
template <typename Dtype>
bool cpu_all_finite(size_t n, const Dtype* x);

template <typename Dtype>
inline void cpu_copy(int n, const Dtype* x, Dtype* y) {
  if (x != y && n > 0) std::memcpy(y, x, sizeof(Dtype) * n);
}
// Copies `rows` runs of `width` values from src (rows `src_stride` apart) to dst (rows `dst_stride` apart), on
// several threads when there is enough to copy (Concat and Slice along an axis).
template <typename Dtype>
void cpu_copy_rows(int rows, int width, const Dtype* src, int src_stride, Dtype* dst, int dst_stride);
template <typename Dtype>
inline void cpu_set(int n, Dtype alpha, Dtype* y) {
  if (alpha == Dtype(0)) {
    if (n > 0) std::memset(y, 0, sizeof(Dtype) * n);
    return;
  }
  for (int i = 0; i < n; ++i) y[i] = alpha;
}
// y = alpha * x
template <typename Dtype>
inline void cpu_scale(int n, Dtype alpha, const Dtype* x, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = alpha * x[i];
}
template <typename Dtype>
inline void cpu_add_scalar(int n, Dtype alpha, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] += alpha;
}
template <typename Dtype>
inline void cpu_add(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
template <typename Dtype>
inline void cpu_sub(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = a[i] - b[i];
}
template <typename Dtype>
inline void cpu_mul(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
template <typename Dtype>
inline void cpu_div(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = a[i] / b[i];
}
template <typename Dtype>
inline void cpu_sqr(int n, const Dtype* a, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = a[i] * a[i];
}
template <typename Dtype>
inline void cpu_sqrt(int n, const Dtype* a, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = std::sqrt(a[i]);
}
template <typename Dtype>
inline void cpu_powx(int n, const Dtype* a, Dtype b, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = std::pow(a[i], b);
}
template <typename Dtype>
inline void cpu_exp(int n, const Dtype* a, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = std::exp(a[i]);
}
template <typename Dtype>
inline void cpu_log(int n, const Dtype* a, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = std::log(a[i]);
}
template <typename Dtype>
inline void cpu_abs(int n, const Dtype* a, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = std::fabs(a[i]);
}
template <typename Dtype>
inline Dtype cpu_sum(int n, const Dtype* a) {
  Dtype s = 0;
  for (int i = 0; i < n; ++i) s += a[i];
  return s;
}

// Random numbers from the calling thread's engine (Strata::rng()).
template <typename Dtype>
void rng_uniform(int n, Dtype a, Dtype b, Dtype* r);
template <typename Dtype>
void rng_gaussian(int n, Dtype mu, Dtype sigma, Dtype* r);
template <typename Dtype>
void rng_bernoulli(int n, Dtype p, unsigned int* r);

#ifdef STRATA_USE_CUDA
// The same operations on device pointers (GPU builds only): BLAS through cuBLAS on the calling thread's handle,
// the rest as small CUDA kernels, all on the default stream. Scalars (alpha, beta) live on the host; dot and
// asum return to the host and so wait for the device.
template <typename Dtype>
void gpu_gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N, int K, Dtype alpha, const Dtype* A,
              const Dtype* B, Dtype beta, Dtype* C);
template <typename Dtype>
void gpu_gemv(CBLAS_TRANSPOSE trans_a, int M, int N, Dtype alpha, const Dtype* A, const Dtype* x, Dtype beta,
              Dtype* y);
template <typename Dtype>
void gpu_axpy(int n, Dtype alpha, const Dtype* x, Dtype* y);
template <typename Dtype>
void gpu_axpby(int n, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y);
template <typename Dtype>
void gpu_scal(int n, Dtype alpha, Dtype* x);
template <typename Dtype>
Dtype gpu_dot(int n, const Dtype* x, const Dtype* y);
template <typename Dtype>
Dtype gpu_asum(int n, const Dtype* x);
// cpu_all_finite over every (device pointer, count) span at once: one wait for the device for all of them (a loss
// scale checks every gradient of a net each iteration; a reduction per blob would wait once per blob).
template <typename Dtype>
bool gpu_all_finite(const std::vector<std::pair<const Dtype*, size_t>>& spans);
template <typename Dtype>
void gpu_copy(int n, const Dtype* x, Dtype* y);
// cpu_copy_rows on the device: one 2-D copy (float, double, and uint16_t for the 16-bit storage types' bits).
template <typename Dtype>
void gpu_copy_rows(int rows, int width, const Dtype* src, int src_stride, Dtype* dst, int dst_stride);
template <typename Dtype>
void gpu_set(int n, Dtype alpha, Dtype* y);
template <typename Dtype>
void gpu_scale(int n, Dtype alpha, const Dtype* x, Dtype* y);
template <typename Dtype>
void gpu_add_scalar(int n, Dtype alpha, Dtype* y);
template <typename Dtype>
void gpu_add(int n, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_sub(int n, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_mul(int n, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_div(int n, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_sqr(int n, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_sqrt(int n, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_powx(int n, const Dtype* a, Dtype b, Dtype* y);
template <typename Dtype>
void gpu_exp(int n, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_log(int n, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_abs(int n, const Dtype* a, Dtype* y);
// y[i] += alpha * sign(x[i]) (L1 regularisation)
template <typename Dtype>
void gpu_add_sign(int n, Dtype alpha, const Dtype* x, Dtype* y);
#endif

}  // namespace strata
