// The GPU math of math_functions.hpp: cuBLAS for BLAS, one small grid-stride kernel per element-wise operation.
#include <algorithm>

#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
#include "strata/math_functions.hpp"
#include "device_memory.hpp"

namespace strata {

namespace {

// Strata's matrices are row-major and cuBLAS's column-major: a row-major M x N matrix is the column-major N x M
// transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T with the operands swapped.
inline cublasOperation_t op(CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CUBLAS_OP_N : CUBLAS_OP_T; }

template <typename Dtype, typename F>
__global__ void map1(long long n, const Dtype* a, Dtype* y, F f) {
  STRATA_KERNEL_LOOP(i, n) y[i] = f(a[i]);
}
template <typename Dtype, typename F>
__global__ void map2(long long n, const Dtype* a, const Dtype* b, Dtype* y, F f) {
  STRATA_KERNEL_LOOP(i, n) y[i] = f(a[i], b[i]);
}
template <typename Dtype>
__global__ void set_kernel(long long n, Dtype alpha, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = alpha;
}
template <typename Dtype>
__global__ void add_scalar_kernel(long long n, Dtype alpha, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] += alpha;
}
template <typename Dtype>
__global__ void add_sign_kernel(long long n, Dtype alpha, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] += alpha * static_cast<Dtype>((x[i] > Dtype(0)) - (x[i] < Dtype(0)));
}

// Up to this many spans go to one launch of non_finite_kernel, by value in its parameters (1 KiB of them).
constexpr int kFiniteSpans = 64;
template <typename Dtype>
struct FiniteSpans {
  const Dtype* x[kFiniteSpans];
  long long n[kFiniteSpans];
};
// Sets *flag where a value of span blockIdx.y is inf or NaN.
template <typename Dtype>
__global__ void non_finite_kernel(FiniteSpans<Dtype> spans, unsigned int* flag) {
  const Dtype* x = spans.x[blockIdx.y];
  const long long n = spans.n[blockIdx.y];
  bool bad = false;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(blockDim.x) * gridDim.x) {
    bad |= !isfinite(x[i]);
  }
  if (bad) *flag = 1u;  // every writer writes the same value
}

template <typename Dtype, typename F>
void launch1(int n, const Dtype* a, Dtype* y, F f) {
  if (n <= 0) return;
  map1<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), a, y, f);
  STRATA_CUDA_KERNEL_CHECK();
}
template <typename Dtype, typename F>
void launch2(int n, const Dtype* a, const Dtype* b, Dtype* y, F f) {
  if (n <= 0) return;
  map2<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), a, b, y, f);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace

template <>
void gpu_gemm<float>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                     const float* B, float beta, float* C) {
  const int lda = ta == CblasNoTrans ? K : M;
  const int ldb = tb == CblasNoTrans ? N : K;
  STRATA_CUBLAS(cublasSgemm, cuda::cublas(), op(tb), op(ta), N, M, K, &alpha, B, ldb, A, lda, &beta, C, N);
}
template <>
void gpu_gemm<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  const int lda = ta == CblasNoTrans ? K : M;
  const int ldb = tb == CblasNoTrans ? N : K;
  STRATA_CUBLAS(cublasDgemm, cuda::cublas(), op(tb), op(ta), N, M, K, &alpha, B, ldb, A, lda, &beta, C, N);
}

// Row-major M x N A is column-major N x M: y = A x is y = (A^T)^T x, so the transposition flips.
template <>
void gpu_gemv<float>(CBLAS_TRANSPOSE ta, int M, int N, float alpha, const float* A, const float* x, float beta,
                     float* y) {
  const cublasOperation_t t = ta == CblasNoTrans ? CUBLAS_OP_T : CUBLAS_OP_N;
  STRATA_CUBLAS(cublasSgemv, cuda::cublas(), t, N, M, &alpha, A, N, x, 1, &beta, y, 1);
}
template <>
void gpu_gemv<double>(CBLAS_TRANSPOSE ta, int M, int N, double alpha, const double* A, const double* x,
                      double beta, double* y) {
  const cublasOperation_t t = ta == CblasNoTrans ? CUBLAS_OP_T : CUBLAS_OP_N;
  STRATA_CUBLAS(cublasDgemv, cuda::cublas(), t, N, M, &alpha, A, N, x, 1, &beta, y, 1);
}

template <>
void gpu_axpy<float>(int n, float alpha, const float* x, float* y) {
  if (n > 0) STRATA_CUBLAS(cublasSaxpy, cuda::cublas(), n, &alpha, x, 1, y, 1);
}
template <>
void gpu_axpy<double>(int n, double alpha, const double* x, double* y) {
  if (n > 0) STRATA_CUBLAS(cublasDaxpy, cuda::cublas(), n, &alpha, x, 1, y, 1);
}

template <>
void gpu_scal<float>(int n, float alpha, float* x) {
  if (n > 0) STRATA_CUBLAS(cublasSscal, cuda::cublas(), n, &alpha, x, 1);
}
template <>
void gpu_scal<double>(int n, double alpha, double* x) {
  if (n > 0) STRATA_CUBLAS(cublasDscal, cuda::cublas(), n, &alpha, x, 1);
}

template <typename Dtype>
void gpu_axpby(int n, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y) {
  launch2(n, x, static_cast<const Dtype*>(y), y, [alpha, beta] __device__(Dtype a, Dtype b) { return alpha * a + beta * b; });
}

template <>
float gpu_dot<float>(int n, const float* x, const float* y) {
  float r = 0;
  if (n > 0) STRATA_CUBLAS(cublasSdot, cuda::cublas(), n, x, 1, y, 1, &r);
  return r;
}
template <>
double gpu_dot<double>(int n, const double* x, const double* y) {
  double r = 0;
  if (n > 0) STRATA_CUBLAS(cublasDdot, cuda::cublas(), n, x, 1, y, 1, &r);
  return r;
}

template <>
float gpu_asum<float>(int n, const float* x) {
  float r = 0;
  if (n > 0) STRATA_CUBLAS(cublasSasum, cuda::cublas(), n, x, 1, &r);
  return r;
}
template <>
double gpu_asum<double>(int n, const double* x) {
  double r = 0;
  if (n > 0) STRATA_CUBLAS(cublasDasum, cuda::cublas(), n, x, 1, &r);
  return r;
}

template <typename Dtype>
void gpu_copy(int n, const Dtype* x, Dtype* y) {
  if (x != y && n > 0) STRATA_CUDA_CHECK(cudaMemcpy(y, x, sizeof(Dtype) * n, cudaMemcpyDeviceToDevice));
}

template <typename Dtype>
void gpu_copy_rows(int rows, int width, const Dtype* src, int src_stride, Dtype* dst, int dst_stride) {
  if (rows <= 0 || width <= 0) return;
  // Rows that are one contiguous run (a whole blob: Dropout's TEST-phase copy) go as one flat copy: cudaMemcpy2D
  // refuses a pitch above the device's maximum (cudaDevAttrMaxPitch, 2^31 - 1 bytes on current GPUs).
  if (rows == 1 || (src_stride == width && dst_stride == width)) {
    STRATA_CUDA_CHECK(cudaMemcpy(dst, src, sizeof(Dtype) * static_cast<size_t>(width) * rows,
                                 cudaMemcpyDeviceToDevice));
    return;
  }
  STRATA_CUDA_CHECK(cudaMemcpy2D(dst, sizeof(Dtype) * dst_stride, src, sizeof(Dtype) * src_stride,
                                 sizeof(Dtype) * width, rows, cudaMemcpyDeviceToDevice));
}

template <typename Dtype>
void gpu_set(int n, Dtype alpha, Dtype* y) {
  if (n <= 0) return;
  if (alpha == Dtype(0)) {
    STRATA_CUDA_CHECK(cudaMemset(y, 0, sizeof(Dtype) * n));
    return;
  }
  set_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), alpha, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void gpu_scale(int n, Dtype alpha, const Dtype* x, Dtype* y) {
  launch1(n, x, y, [alpha] __device__(Dtype v) { return alpha * v; });
}

template <typename Dtype>
void gpu_add_scalar(int n, Dtype alpha, Dtype* y) {
  if (n <= 0) return;
  add_scalar_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), alpha, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void gpu_add_sign(int n, Dtype alpha, const Dtype* x, Dtype* y) {
  if (n <= 0) return;
  add_sign_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), alpha, x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void gpu_add(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  launch2(n, a, b, y, [] __device__(Dtype u, Dtype v) { return u + v; });
}
template <typename Dtype>
void gpu_sub(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  launch2(n, a, b, y, [] __device__(Dtype u, Dtype v) { return u - v; });
}
template <typename Dtype>
void gpu_mul(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  launch2(n, a, b, y, [] __device__(Dtype u, Dtype v) { return u * v; });
}
template <typename Dtype>
void gpu_div(int n, const Dtype* a, const Dtype* b, Dtype* y) {
  launch2(n, a, b, y, [] __device__(Dtype u, Dtype v) { return u / v; });
}
template <typename Dtype>
void gpu_sqr(int n, const Dtype* a, Dtype* y) {
  launch1(n, a, y, [] __device__(Dtype v) { return v * v; });
}
template <typename Dtype>
void gpu_sqrt(int n, const Dtype* a, Dtype* y) {
  launch1(n, a, y, [] __device__(Dtype v) { return sqrt(v); });
}
template <typename Dtype>
void gpu_powx(int n, const Dtype* a, Dtype b, Dtype* y) {
  launch1(n, a, y, [b] __device__(Dtype v) { return pow(v, b); });
}
template <typename Dtype>
void gpu_exp(int n, const Dtype* a, Dtype* y) {
  launch1(n, a, y, [] __device__(Dtype v) { return exp(v); });
}
template <typename Dtype>
void gpu_log(int n, const Dtype* a, Dtype* y) {
  launch1(n, a, y, [] __device__(Dtype v) { return log(v); });
}
template <typename Dtype>
void gpu_abs(int n, const Dtype* a, Dtype* y) {
  launch1(n, a, y, [] __device__(Dtype v) { return fabs(v); });
}

template <typename Dtype>
bool gpu_all_finite(const std::vector<std::pair<const Dtype*, size_t>>& spans) {
  auto* flag = static_cast<unsigned int*>(cuda::device_alloc(sizeof(unsigned int)));
  STRATA_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(unsigned int), 0));
  for (size_t first = 0; first < spans.size(); first += kFiniteSpans) {
    FiniteSpans<Dtype> batch{};
    const int count = static_cast<int>(std::min<size_t>(kFiniteSpans, spans.size() - first));
    long long longest = 0;
    for (int s = 0; s < count; ++s) {
      batch.x[s] = spans[first + s].first;
      batch.n[s] = static_cast<long long>(spans[first + s].second);
      longest = std::max(longest, batch.n[s]);
    }
    if (longest == 0) continue;
    // Blocks enough for the longest span, at most what keeps the device busy; shorter spans leave blocks idle.
    const dim3 grid(static_cast<unsigned>(std::min<long long>(cuda::blocks(longest), 1024)), count);
    non_finite_kernel<<<grid, cuda::kThreads>>>(batch, flag);
    STRATA_CUDA_KERNEL_CHECK();
  }
  unsigned int found = 0;
  const cudaError_t copied = cudaMemcpy(&found, flag, sizeof found, cudaMemcpyDeviceToHost);
  cuda::device_free(flag);
  STRATA_CUDA_CHECK(copied);
  return found == 0;
}

#define STRATA_INSTANTIATE_GPU_MATH(Dtype)                                             \
  template bool gpu_all_finite<Dtype>(const std::vector<std::pair<const Dtype*, size_t>>&); \
  template void gpu_axpby<Dtype>(int, Dtype, const Dtype*, Dtype, Dtype*);             \
  template void gpu_copy<Dtype>(int, const Dtype*, Dtype*);                            \
  template void gpu_copy_rows<Dtype>(int, int, const Dtype*, int, Dtype*, int);        \
  template void gpu_set<Dtype>(int, Dtype, Dtype*);                                    \
  template void gpu_scale<Dtype>(int, Dtype, const Dtype*, Dtype*);                    \
  template void gpu_add_scalar<Dtype>(int, Dtype, Dtype*);                             \
  template void gpu_add_sign<Dtype>(int, Dtype, const Dtype*, Dtype*);                 \
  template void gpu_add<Dtype>(int, const Dtype*, const Dtype*, Dtype*);               \
  template void gpu_sub<Dtype>(int, const Dtype*, const Dtype*, Dtype*);               \
  template void gpu_mul<Dtype>(int, const Dtype*, const Dtype*, Dtype*);               \
  template void gpu_div<Dtype>(int, const Dtype*, const Dtype*, Dtype*);               \
  template void gpu_sqr<Dtype>(int, const Dtype*, Dtype*);                             \
  template void gpu_sqrt<Dtype>(int, const Dtype*, Dtype*);                            \
  template void gpu_powx<Dtype>(int, const Dtype*, Dtype, Dtype*);                     \
  template void gpu_exp<Dtype>(int, const Dtype*, Dtype*);                             \
  template void gpu_log<Dtype>(int, const Dtype*, Dtype*);                             \
  template void gpu_abs<Dtype>(int, const Dtype*, Dtype*)

STRATA_INSTANTIATE_GPU_MATH(float);
STRATA_INSTANTIATE_GPU_MATH(double);
// The 16-bit storage types' rows, copied as their bits (src/strata/layers/device_storage.cuh, gpu_copy_rows_as).
template void gpu_copy_rows<uint16_t>(int, int, const uint16_t*, int, uint16_t*, int);

}  // namespace strata
