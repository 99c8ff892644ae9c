#include "strata/math_functions.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <type_traits>

#include "strata/parallel.hpp"

namespace strata {

namespace {

// One GEMM with explicit leading dimensions, on the calling thread (OpenBLAS is pinned to one thread).
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                      int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Splits C = alpha op(A) op(B) + beta C into blocks of whole rows or whole columns of C, one per thread; the
// reduction dimension K is never split, so a given thread count gives the same bits on every run. (Not the same
// bits as another count: OpenBLAS may round a block's edge rows differently from the same rows inside the whole
// product; tests/test_thread_determinism.cpp.) Rows are split when C is taller than wide, else columns; block
// edges fall on multiples of 16 so that every block keeps OpenBLAS's full-width kernels.
template <typename Dtype>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, Dtype alpha, const Dtype* A, const Dtype* B,
          Dtype beta, Dtype* C) {
  const int lda = (ta == CblasNoTrans) ? K : M;
  const int ldb = (tb == CblasNoTrans) ? N : K;
  const bool split_rows = M >= N;
  const int extent = split_rows ? M : N;
  int blocks = std::min(compute_threads(), extent / 16);
  if (blocks < 2 || !parallel_worthwhile(static_cast<long long>(M) * N * K / 64)) {
    blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(blocks)
  for (int b = 0; b < blocks; ++b) {
    const int step = (extent / blocks + 15) / 16 * 16;
    const int lo = std::min(extent, b * step);
    const int hi = (b == blocks - 1) ? extent : std::min(extent, lo + step);
    if (hi <= lo) continue;
    if (split_rows) {
      const Dtype* a = (ta == CblasNoTrans) ? A + static_cast<long>(lo) * lda : A + lo;
      blas_gemm(ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + static_cast<long>(lo) * N, N);
    } else {
      const Dtype* bb = (tb == CblasNoTrans) ? B + lo : B + static_cast<long>(lo) * ldb;
      blas_gemm(ta, tb, M, hi - lo, K, alpha, A, lda, bb, ldb, beta, C + lo, N);
    }
  }
}

}  // namespace

template <>
void cpu_gemm<float>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                     const float* B, float beta, float* C) {
  gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}
template <>
void cpu_gemm<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

template <>
void cpu_gemv<float>(CBLAS_TRANSPOSE ta, int M, int N, float alpha, const float* A, const float* x, float beta,
                     float* y) {
  cblas_sgemv(CblasRowMajor, ta, M, N, alpha, A, N, x, 1, beta, y, 1);
}
template <>
void cpu_gemv<double>(CBLAS_TRANSPOSE ta, int M, int N, double alpha, const double* A, const double* x,
                      double beta, double* y) {
  cblas_dgemv(CblasRowMajor, ta, M, N, alpha, A, N, x, 1, beta, y, 1);
}

template <>
void cpu_axpy<float>(int n, float alpha, const float* x, float* y) {
  cblas_saxpy(n, alpha, x, 1, y, 1);
}
template <>
void cpu_axpy<double>(int n, double alpha, const double* x, double* y) {
  cblas_daxpy(n, alpha, x, 1, y, 1);
}

template <typename Dtype>
void cpu_axpby(int n, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y) {
  for (int i = 0; i < n; ++i) y[i] = alpha * x[i] + beta * y[i];
}
template void cpu_axpby<float>(int, float, const float*, float, float*);
template void cpu_axpby<double>(int, double, const double*, double, double*);

template <>
void cpu_scal<float>(int n, float alpha, float* x) {
  cblas_sscal(n, alpha, x, 1);
}
template <>
void cpu_scal<double>(int n, double alpha, double* x) {
  cblas_dscal(n, alpha, x, 1);
}

template <>
float cpu_strided_dot<float>(int n, const float* x, int incx, const float* y, int incy) {
  return cblas_sdot(n, x, incx, y, incy);
}
template <>
double cpu_strided_dot<double>(int n, const double* x, int incx, const double* y, int incy) {
  return cblas_ddot(n, x, incx, y, incy);
}
template <typename Dtype>
Dtype cpu_dot(int n, const Dtype* x, const Dtype* y) {
  return cpu_strided_dot(n, x, 1, y, 1);
}
template float cpu_dot<float>(int, const float*, const float*);
template double cpu_dot<double>(int, const double*, const double*);

template <>
float cpu_asum<float>(int n, const float* x) {
  return cblas_sasum(n, x, 1);
}
template <>
double cpu_asum<double>(int n, const double* x) {
  return cblas_dasum(n, x, 1);
}

template <typename Dtype>
bool cpu_all_finite(size_t n, const Dtype* x) {
  // inf and NaN are the values whose exponent bits are all ones. An OR of integer tests runs at memory speed; a
  // float sum (of x * 0, say) would be one chain of dependent adds, which the compiler may not reorder.
  using Bits = std::conditional_t<sizeof(Dtype) == sizeof(uint32_t), uint32_t, uint64_t>;
  constexpr Bits kExponent = sizeof(Dtype) == sizeof(uint32_t) ? Bits(0x7F800000u) : Bits(0x7FF0000000000000ull);
  Bits bad = 0;
  for (size_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, x + i, sizeof v);
    bad |= Bits((v & kExponent) == kExponent);
  }
  return bad == 0;
}
template bool cpu_all_finite<float>(size_t, const float*);
template bool cpu_all_finite<double>(size_t, const double*);

template <typename Dtype>
void rng_uniform(int n, Dtype a, Dtype b, Dtype* r) {
  CHECK_LE(a, b);
  std::uniform_real_distribution<Dtype> dist(a, b);
  auto& engine = Strata::rng();
  for (int i = 0; i < n; ++i) r[i] = (a == b) ? a : dist(engine);
}
template void rng_uniform<float>(int, float, float, float*);
template void rng_uniform<double>(int, double, double, double*);

template <typename Dtype>
void rng_gaussian(int n, Dtype mu, Dtype sigma, Dtype* r) {
  CHECK_GT(sigma, 0);
  std::normal_distribution<Dtype> dist(mu, sigma);
  auto& engine = Strata::rng();
  for (int i = 0; i < n; ++i) r[i] = dist(engine);
}
template void rng_gaussian<float>(int, float, float, float*);
template void rng_gaussian<double>(int, double, double, double*);

template <typename Dtype>
void rng_bernoulli(int n, Dtype p, unsigned int* r) {
  CHECK_GE(p, 0);
  CHECK_LE(p, 1);
  std::bernoulli_distribution dist(p);
  auto& engine = Strata::rng();
  for (int i = 0; i < n; ++i) r[i] = dist(engine) ? 1u : 0u;
}
template void rng_bernoulli<float>(int, float, unsigned int*);
template void rng_bernoulli<double>(int, double, unsigned int*);


template <typename Dtype>
void cpu_copy_rows(int rows, int width, const Dtype* src, int src_stride, Dtype* dst, int dst_stride) {
  // Long rows are split into pieces of this many values so that even one row spreads over the threads.
  constexpr int kPiece = 1 << 15;
  if (!parallel_worthwhile(static_cast<long long>(rows) * width / 2)) {
    for (int r = 0; r < rows; ++r) {
      cpu_copy(width, src + static_cast<size_t>(r) * src_stride, dst + static_cast<size_t>(r) * dst_stride);
    }
    return;
  }
  const int pieces = (width + kPiece - 1) / kPiece;
  const long long tasks = static_cast<long long>(rows) * pieces;
#pragma omp parallel for schedule(static)
  for (long long t = 0; t < tasks; ++t) {
    const int r = static_cast<int>(t / pieces);
    const int begin = static_cast<int>(t % pieces) * kPiece;
    cpu_copy(std::min(kPiece, width - begin), src + static_cast<size_t>(r) * src_stride + begin,
             dst + static_cast<size_t>(r) * dst_stride + begin);
  }
}
template void cpu_copy_rows<float>(int, int, const float*, int, float*, int);
template void cpu_copy_rows<double>(int, int, const double*, int, double*, int);

}  // namespace strata
