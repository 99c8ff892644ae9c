#include "lstm_cell.hpp"
#include "recurrent_math.hpp"
#include "strata/cuda.hpp"

namespace strata {

namespace {

template <typename Dtype>
__global__ void scale_rows_kernel(long long n, int width, const Dtype* s, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) y[k] = s[k / width] * x[k];
}

template <typename Dtype>
__global__ void add_to_rows_kernel(long long n, int width, const Dtype* v, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) y[k] += v[k % width];
}

// One thread per column; neighbouring threads read neighbouring values of a row.
template <typename Dtype>
__global__ void add_column_sums_kernel(int rows, int width, const Dtype* x, Dtype* v) {
  STRATA_KERNEL_LOOP(j, width) {
    Dtype sum = 0;
    for (int r = 0; r < rows; ++r) sum += x[static_cast<long long>(r) * width + j];
    v[j] += sum;
  }
}

template <typename Dtype>
__global__ void tanh_kernel(long long n, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) y[k] = lstm::tanh_of(x[k]);
}

template <typename Dtype>
__global__ void tanh_backward_kernel(long long n, const Dtype* y, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) dx[k] = dy[k] * (Dtype(1) - y[k] * y[k]);
}

template <typename Dtype>
__global__ void lstm_forward_kernel(long long n, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont,
                                    Dtype* c, Dtype* h) {
  STRATA_KERNEL_LOOP(k, n) lstm::CellForward(k, H, x, c_prev, cont, c, h);
}

template <typename Dtype>
__global__ void lstm_backward_kernel(long long n, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont,
                                     const Dtype* c, const Dtype* dc, const Dtype* dh, Dtype* dx, Dtype* dc_prev) {
  STRATA_KERNEL_LOOP(k, n) lstm::CellBackward(k, H, x, c_prev, cont, c, dc, dh, dx, dc_prev);
}

}  // namespace

template <typename Dtype>
void GpuMath<Dtype>::scale_rows(int rows, int width, const Dtype* s, const Dtype* x, Dtype* y) {
  const long long n = static_cast<long long>(rows) * width;
  if (n == 0) return;
  scale_rows_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, width, s, x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::add_to_rows(int rows, int width, const Dtype* v, Dtype* y) {
  const long long n = static_cast<long long>(rows) * width;
  if (n == 0) return;
  add_to_rows_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, width, v, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::add_column_sums(int rows, int width, const Dtype* x, Dtype* v) {
  if (width == 0) return;
  add_column_sums_kernel<<<cuda::blocks(width), cuda::kThreads>>>(rows, width, x, v);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::tanh(int n, const Dtype* x, Dtype* y) {
  if (n == 0) return;
  tanh_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::tanh_backward(int n, const Dtype* y, const Dtype* dy, Dtype* dx) {
  if (n == 0) return;
  tanh_backward_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), y, dy, dx);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::lstm_forward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, Dtype* c,
                                  Dtype* h) {
  const long long n = static_cast<long long>(N) * H;
  if (n == 0) return;
  lstm_forward_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, H, x, c_prev, cont, c, h);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuMath<Dtype>::lstm_backward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, const Dtype* c,
                                   const Dtype* dc, const Dtype* dh, Dtype* dx, Dtype* dc_prev) {
  const long long n = static_cast<long long>(N) * H;
  if (n == 0) return;
  lstm_backward_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, H, x, c_prev, cont, c, dc, dh, dx, dc_prev);
  STRATA_CUDA_KERNEL_CHECK();
}

template struct GpuMath<float>;
template struct GpuMath<double>;

}  // namespace strata
