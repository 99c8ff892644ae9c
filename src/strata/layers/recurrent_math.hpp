// The operations the recurrent layers (RNN, LSTM, LSTMUnit) are written in, for each device: the layers' time
// loops are written once, as templates over one of these (private to src/strata/layers). CpuMath is defined
// here; GpuMath's element-wise kernels are in recurrent_math.cu.
#pragma once

#include "activation_kernels.hpp"
#include "lstm_cell.hpp"
#include "strata/blob.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
struct CpuMath {
  static const Dtype* data(const Blob<Dtype>& b) { return b.cpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.cpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_cpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_cpu_diff(); }

  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, Dtype alpha, const Dtype* A,
                   const Dtype* B, Dtype beta, Dtype* C) {
    cpu_gemm<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C);
  }
  static void copy(int n, const Dtype* x, Dtype* y) { cpu_copy(n, x, y); }
  static void set(int n, Dtype v, Dtype* y) { cpu_set(n, v, y); }
  static void axpy(int n, Dtype a, const Dtype* x, Dtype* y) { cpu_axpy(n, a, x, y); }
  static void add(int n, const Dtype* a, const Dtype* b, Dtype* y) { cpu_add(n, a, b, y); }

  // y[r][j] = s[r] * x[r][j] for rows r < rows, columns j < width (y may be x).
  static void scale_rows(int rows, int width, const Dtype* s, const Dtype* x, Dtype* y) {
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < width; ++j) y[r * width + j] = s[r] * x[r * width + j];
    }
  }
  // y[r][j] += v[j].
  static void add_to_rows(int rows, int width, const Dtype* v, Dtype* y) {
    for (int r = 0; r < rows; ++r) cpu_axpy(width, Dtype(1), v, y + static_cast<long>(r) * width);
  }
  // v[j] += sum over r of x[r][j].
  static void add_column_sums(int rows, int width, const Dtype* x, Dtype* v) {
    for (int r = 0; r < rows; ++r) cpu_axpy(width, Dtype(1), x + static_cast<long>(r) * width, v);
  }
  // y = tanh(x) (y may be x).
  static void tanh(int n, const Dtype* x, Dtype* y) {
    act::map(n, x, y, [](Dtype v) { return act::tanh(v); });
  }
  // dx = dy * (1 - y^2), the gradient through y = tanh(x) (dx may be dy).
  static void tanh_backward(int n, const Dtype* y, const Dtype* dy, Dtype* dx) {
    act::map(n, y, dy, dx, [](Dtype yv, Dtype d) { return d * (Dtype(1) - yv * yv); });
  }
  // The LSTM cell step over N streams of H units (lstm_cell.hpp).
  static void lstm_forward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, Dtype* c, Dtype* h) {
    const long long n = static_cast<long long>(N) * H;
    for (long long k = 0; k < n; ++k) lstm::CellForward(k, H, x, c_prev, cont, c, h);
  }
  static void lstm_backward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, const Dtype* c,
                            const Dtype* dc, const Dtype* dh, Dtype* dx, Dtype* dc_prev) {
    const long long n = static_cast<long long>(N) * H;
    for (long long k = 0; k < n; ++k) lstm::CellBackward(k, H, x, c_prev, cont, c, dc, dh, dx, dc_prev);
  }
};

#ifdef STRATA_USE_CUDA
// The same operations on the device: cuBLAS through the gpu_* helpers, and the kernels of recurrent_math.cu.
template <typename Dtype>
struct GpuMath {
  static const Dtype* data(const Blob<Dtype>& b) { return b.gpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.gpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_gpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_gpu_diff(); }

  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, Dtype alpha, const Dtype* A,
                   const Dtype* B, Dtype beta, Dtype* C) {
    gpu_gemm<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C);
  }
  static void copy(int n, const Dtype* x, Dtype* y) { gpu_copy(n, x, y); }
  static void set(int n, Dtype v, Dtype* y) { gpu_set(n, v, y); }
  static void axpy(int n, Dtype a, const Dtype* x, Dtype* y) { gpu_axpy(n, a, x, y); }
  static void add(int n, const Dtype* a, const Dtype* b, Dtype* y) { gpu_add(n, a, b, y); }
  static void scale_rows(int rows, int width, const Dtype* s, const Dtype* x, Dtype* y);
  static void add_to_rows(int rows, int width, const Dtype* v, Dtype* y);
  static void add_column_sums(int rows, int width, const Dtype* x, Dtype* v);
  static void tanh(int n, const Dtype* x, Dtype* y);
  static void tanh_backward(int n, const Dtype* y, const Dtype* dy, Dtype* dx);
  static void lstm_forward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, Dtype* c, Dtype* h);
  static void lstm_backward(int N, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont, const Dtype* c,
                            const Dtype* dc, const Dtype* dh, Dtype* dx, Dtype* dc_prev);
};
#endif

}  // namespace strata
