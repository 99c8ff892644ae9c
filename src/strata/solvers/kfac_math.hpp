// The operations of a K-FAC block (kfac_block.cpp) on one device: the block's steps are written once, as templates
// over one of these (as the Reversible layer's are over coupling_math.hpp). CpuKfacMath is defined here and in
// kfac_math.cpp (LAPACK); GpuKfacMath's kernels are in kfac_math.cu, its BLAS is cuBLAS and its LAPACK cuSOLVER.
// Matrices are row-major. The inversions work in double whatever Dtype is (As<double>: the same device's
// operations on doubles).
#pragma once

#include <algorithm>
#include <cmath>

#include "strata/blob.hpp"
#include "strata/im2col.hpp"
#include "strata/math_functions.hpp"

namespace strata {

// The inversions on the host (LAPACK, kfac_math.cpp); see CpuKfacMath's members of the same names.
bool lapack_cholesky_inverse(int n, double* m);
bool lapack_symmetric_eigen(int n, double* m, double* values);

template <typename Dtype>
struct CpuKfacMath {
  template <typename T>
  using As = CpuKfacMath<T>;
  static const Dtype* data(const Blob<Dtype>& b) { return b.cpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.cpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_cpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_cpu_diff(); }
  // For a writer of every value: the old values are neither kept nor copied from the other device.
  static Dtype* overwritten_data(Blob<Dtype>& b) { return b.mutable_cpu_data_in(MemoryFormat::kPlain, false); }
  // n values between the host and this device's memory (here, the host's too).
  static void upload(int n, const Dtype* host, Dtype* y) { std::copy(host, host + n, y); }
  static void download(int n, const Dtype* x, Dtype* host) { std::copy(x, x + n, host); }

  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, Dtype alpha, const Dtype* a,
                   const Dtype* b, Dtype beta, Dtype* c) {
    cpu_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  static void gemv(CBLAS_TRANSPOSE ta, int m, int n, Dtype alpha, const Dtype* a, const Dtype* x, Dtype beta,
                   Dtype* y) {
    cpu_gemv(ta, m, n, alpha, a, x, beta, y);
  }
  static void set(int n, Dtype v, Dtype* y) { cpu_set(n, v, y); }
  static void copy(int n, const Dtype* x, Dtype* y) { cpu_copy(n, x, y); }
  static void scal(int n, Dtype alpha, Dtype* x) { cpu_scal(n, alpha, x); }
  static void scale(int n, Dtype alpha, const Dtype* x, Dtype* y) { cpu_scale(n, alpha, x, y); }
  // out[b] (host) = <x, y> over range b of `blocks` ranges [starts[b], starts[b] + sizes[b]) (host arrays), summed
  // in double: one pass for every block's dot product.
  static void block_dots(int blocks, const int* starts, const int* sizes, const Dtype* x, const Dtype* y,
                         double* out) {
    for (int b = 0; b < blocks; ++b) {
      double s = 0;
      for (int i = starts[b]; i < starts[b] + sizes[b]; ++i) s += static_cast<double>(x[i]) * y[i];
      out[b] = s;
    }
  }
  static bool all_finite(int n, const Dtype* x) {
    return std::all_of(x, x + n, [](Dtype v) { return std::isfinite(static_cast<double>(v)); });
  }
  // `images` images unfolded side by side: row r of the column matrix holds image n's window entries r at
  // columns n * out_count() onwards.
  static void im2col(const Dtype* x, const ConvGeometry& g, int images, Dtype* cols) {
    im2col_batch_cpu(x, g, images, cols);
  }
  // dst (rows x images * positions) = the images' `rows` x `positions` matrices side by side, image n's at
  // src + n * image_stride.
  static void gather_images(int images, int rows, int positions, const Dtype* src, long image_stride, Dtype* dst) {
    for (int n = 0; n < images; ++n) {
      cpu_copy_rows(rows, positions, src + n * image_stride, positions, dst + static_cast<long>(n) * positions,
                    images * positions);
    }
  }
  // out = the upper triangle, row by row, of [inv F, inv s; inv s^T, 1] (F: k x k; `sum` s: k), or of inv F
  // without a sum.
  static void pack_upper(int k, const Dtype* f, const Dtype* sum, Dtype inv, Dtype* out) {
    const int d = sum ? k + 1 : k;
    for (int i = 0; i < d; ++i) {
      for (int j = i; j < d; ++j) {
        if (j < k) {
          *out++ = f[static_cast<long>(i) * k + j] * inv;
        } else if (i < k) {
          *out++ = sum[i] * inv;
        } else {
          *out++ = Dtype(1);  // the homogeneous coordinate's own entry
        }
      }
    }
  }
  // m (rows x k + [b]) = [W b] from weights W (rows x k, or k x rows where `transposed`) and an optional bias b,
  // and back (scatter).
  static void gather_matrix(int rows, int k, bool transposed, const Dtype* w, const Dtype* b, Dtype* m) {
    const int cols = b ? k + 1 : k;
    for (int i = 0; i < rows; ++i) {
      Dtype* row = m + static_cast<long>(i) * cols;
      for (int j = 0; j < k; ++j) row[j] = w[weight_index(rows, k, transposed, i, j)];
      if (b) row[k] = b[i];
    }
  }
  static void scatter_matrix(int rows, int k, bool transposed, const Dtype* m, Dtype* w, Dtype* b) {
    const int cols = b ? k + 1 : k;
    for (int i = 0; i < rows; ++i) {
      const Dtype* row = m + static_cast<long>(i) * cols;
      for (int j = 0; j < k; ++j) w[weight_index(rows, k, transposed, i, j)] = row[j];
      if (b) b[i] = row[k];
    }
  }
  // Where weight (i, j) of a rows x k matrix lies, stored as it is or transposed.
  static long weight_index(int rows, int k, bool transposed, int i, int j) {
    return transposed ? static_cast<long>(j) * rows + i : static_cast<long>(i) * k + j;
  }
  // y (cols x rows) = alpha x^T for x rows x cols.
  static void transpose(int rows, int cols, Dtype alpha, const Dtype* x, Dtype* y) {
    for (int i = 0; i < cols; ++i) {
      for (int r = 0; r < rows; ++r) y[static_cast<long>(i) * rows + r] = alpha * x[static_cast<long>(r) * cols + i];
    }
  }
  // m (rows x cols) /= dg_i da_j + damping: the unsplit damping in the factors' eigenbases (eigenvalues in Dtype).
  static void divide_by_eigenvalues(int rows, int cols, const Dtype* dg, const Dtype* da, Dtype damping, Dtype* m) {
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) m[static_cast<long>(i) * cols + j] /= dg[i] * da[j] + damping;
    }
  }
  // y = x, rounded to Dtype.
  static void convert(int n, const double* x, Dtype* y) {
    for (int i = 0; i < n; ++i) y[i] = static_cast<Dtype>(x[i]);
  }

  // The inversions, in double. m (n x n) += lambda I.
  static void add_diagonal(int n, double lambda, double* m) {
    for (int i = 0; i < n; ++i) m[static_cast<long>(i) * n + i] += lambda;
  }
  // m (symmetric positive definite) = its inverse, by Cholesky; false if it is not, or the inverse is not finite.
  static bool cholesky_inverse(int n, double* m) { return lapack_cholesky_inverse(n, m); }
  // m (symmetric) = its eigenvectors as columns, `values` its n eigenvalues, ascending; false if the solver did
  // not converge or the vectors are not finite.
  static bool symmetric_eigen(int n, double* m, double* values) { return lapack_symmetric_eigen(n, m, values); }
  // m (n x n): column j /= v[j].
  static void divide_columns(int n, const double* v, double* m) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) m[static_cast<long>(i) * n + j] /= v[j];
    }
  }
};

#ifdef STRATA_USE_CUDA
// The same on the device (kfac_math.cu), on the compute stream. block_dots and all_finite return to the host and
// so wait for the device (once a call).
// The inversions on the device (cuSOLVER, kfac_math.cu).
bool cusolver_cholesky_inverse(int n, double* m);
bool cusolver_symmetric_eigen(int n, double* m, double* values);
void gpu_add_diagonal(int n, double lambda, double* m);
void gpu_divide_columns(int n, const double* v, double* m);

template <typename Dtype>
struct GpuKfacMath {
  template <typename T>
  using As = GpuKfacMath<T>;
  static const Dtype* data(const Blob<Dtype>& b) { return b.gpu_data(); }
  static const Dtype* diff(const Blob<Dtype>& b) { return b.gpu_diff(); }
  static Dtype* mutable_data(Blob<Dtype>& b) { return b.mutable_gpu_data(); }
  static Dtype* mutable_diff(Blob<Dtype>& b) { return b.mutable_gpu_diff(); }
  static Dtype* overwritten_data(Blob<Dtype>& b) {
    return static_cast<Dtype*>(b.data()->mutable_gpu_data_in(DeviceFormat::kPlain, /*keep_values=*/false, {}));
  }
  // Straight from the host's vectors: staging them in a blob's host memory would pin (and so wait for the device
  // on) a fresh block each call.
  static void upload(int n, const Dtype* host, Dtype* y);
  static void download(int n, const Dtype* x, Dtype* host);

  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, Dtype alpha, const Dtype* a,
                   const Dtype* b, Dtype beta, Dtype* c) {
    gpu_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  static void gemv(CBLAS_TRANSPOSE ta, int m, int n, Dtype alpha, const Dtype* a, const Dtype* x, Dtype beta,
                   Dtype* y) {
    gpu_gemv(ta, m, n, alpha, a, x, beta, y);
  }
  static void set(int n, Dtype v, Dtype* y) { gpu_set(n, v, y); }
  static void copy(int n, const Dtype* x, Dtype* y) { gpu_copy(n, x, y); }
  static void scal(int n, Dtype alpha, Dtype* x) { gpu_scal(n, alpha, x); }
  static void scale(int n, Dtype alpha, const Dtype* x, Dtype* y) { gpu_scale(n, alpha, x, y); }
  static void block_dots(int blocks, const int* starts, const int* sizes, const Dtype* x, const Dtype* y,
                         double* out);
  static bool all_finite(int n, const Dtype* x);
  static void im2col(const Dtype* x, const ConvGeometry& g, int images, Dtype* cols) {
    im2col_batch_gpu(x, g, images, cols);
  }
  static void gather_images(int images, int rows, int positions, const Dtype* src, long image_stride, Dtype* dst);
  static void pack_upper(int k, const Dtype* f, const Dtype* sum, Dtype inv, Dtype* out);
  static void gather_matrix(int rows, int k, bool transposed, const Dtype* w, const Dtype* b, Dtype* m);
  static void scatter_matrix(int rows, int k, bool transposed, const Dtype* m, Dtype* w, Dtype* b);
  static void transpose(int rows, int cols, Dtype alpha, const Dtype* x, Dtype* y);
  static void divide_by_eigenvalues(int rows, int cols, const Dtype* dg, const Dtype* da, Dtype damping, Dtype* m);
  static void convert(int n, const double* x, Dtype* y);

  static void add_diagonal(int n, double lambda, double* m) { gpu_add_diagonal(n, lambda, m); }
  static bool cholesky_inverse(int n, double* m) { return cusolver_cholesky_inverse(n, m); }
  static bool symmetric_eigen(int n, double* m, double* values) { return cusolver_symmetric_eigen(n, m, values); }
  static void divide_columns(int n, const double* v, double* m) { gpu_divide_columns(n, v, m); }
};
#endif

// Calls f(math) with the operations of the device the solver runs on: GpuKfacMath in GPU mode, CpuKfacMath
// otherwise.
template <typename Dtype, typename F>
decltype(auto) OnSolverDevice(F&& f) {
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) return f(GpuKfacMath<Dtype>());
#endif
  return f(CpuKfacMath<Dtype>());
}

}  // namespace strata
