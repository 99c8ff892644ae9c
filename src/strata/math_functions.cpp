#include "strata/math_functions.hpp"

#include <random>

namespace strata {

template <>
void cpu_gemm<float>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                     const float* B, float beta, float* C) {
  const int lda = (ta == CblasNoTrans) ? K : M;
  const int ldb = (tb == CblasNoTrans) ? N : K;
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}
template <>
void cpu_gemm<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  const int lda = (ta == CblasNoTrans) ? K : M;
  const int ldb = (tb == CblasNoTrans) ? N : K;
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
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

}  // namespace strata
