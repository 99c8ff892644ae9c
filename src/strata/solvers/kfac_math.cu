// GpuKfacMath's kernels (kfac_math.hpp): one launch each, one thread per output element, on the compute stream.
#include "kfac_math.hpp"
#include "strata/cuda.hpp"
#include "strata/device_memory.hpp"

namespace strata {

namespace {

template <typename Dtype>
__global__ void gather_images_kernel(long long count, int images, int positions, const Dtype* src,
                                     long long image_stride, Dtype* dst) {
  const long long width = static_cast<long long>(images) * positions;
  STRATA_KERNEL_LOOP(index, count) {
    const long long r = index / width, column = index % width;
    const long long n = column / positions, p = column % positions;
    dst[index] = src[n * image_stride + r * positions + p];
  }
}

// One thread per entry (i, j) of the d x d matrix; those below the diagonal do nothing. Row i of the packed
// upper triangle starts at i*d - i*(i-1)/2.
template <typename Dtype>
__global__ void pack_upper_kernel(int k, int d, const Dtype* f, const Dtype* sum, Dtype inv, Dtype* out) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(d) * d) {
    const long long i = index / d, j = index % d;
    if (j < i) continue;
    const Dtype v = j < k ? f[i * k + j] * inv : (i < k ? sum[i] * inv : Dtype(1));
    out[i * d - i * (i - 1) / 2 + (j - i)] = v;
  }
}

// One thread per element of the weights (and of the bias, after them): [W b] <-> m.
template <typename Dtype, bool kGather>
__global__ void matrix_kernel(int rows, int k, bool transposed, Dtype* w, Dtype* b, Dtype* m) {
  const long long weights = static_cast<long long>(rows) * k;
  const int cols = b ? k + 1 : k;
  STRATA_KERNEL_LOOP(index, weights + (b ? rows : 0)) {
    long long i, j;
    Dtype* p;
    if (index < weights) {
      // Walk W in its own order, so that its reads or writes are the coalesced ones.
      if (transposed) {
        j = index / rows;
        i = index % rows;
      } else {
        i = index / k;
        j = index % k;
      }
      p = w + index;
    } else {
      i = index - weights;
      j = k;
      p = b + i;
    }
    Dtype* e = m + i * cols + j;
    if (kGather) {
      *e = *p;
    } else {
      *p = *e;
    }
  }
}

template <typename Dtype>
__global__ void transpose_kernel(int rows, int cols, Dtype alpha, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(rows) * cols) {
    const long long i = index / rows, r = index % rows;  // y[i][r]
    y[index] = alpha * x[r * cols + i];
  }
}

template <typename Dtype>
__global__ void divide_kernel(int rows, int cols, const Dtype* dg, const Dtype* da, Dtype damping, Dtype* m) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(rows) * cols) {
    m[index] /= dg[index / cols] * da[index % cols] + damping;
  }
}

template <typename Dtype>
__global__ void finite_kernel(long long n, const Dtype* x, int* bad) {
  STRATA_KERNEL_LOOP(index, n) {
    if (!isfinite(x[index])) *bad = 1;
  }
}

}  // namespace

template <typename Dtype>
bool GpuKfacMath<Dtype>::all_finite(int n, const Dtype* x) {
  if (n <= 0) return true;
  int* bad = static_cast<int*>(cuda::device_alloc(sizeof(int)));  // from the pool: cudaFree would wait for the device
  STRATA_CUDA_CHECK(cudaMemset(bad, 0, sizeof(int)));
  finite_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, bad);
  int host = 0;
  const cudaError_t launched = cudaPeekAtLastError();
  const cudaError_t copied = cudaMemcpy(&host, bad, sizeof(int), cudaMemcpyDeviceToHost);
  cuda::device_free(bad);
  STRATA_CUDA_CHECK(launched);
  STRATA_CUDA_CHECK(copied);
  return host == 0;
}

template <typename Dtype>
void GpuKfacMath<Dtype>::gather_images(int images, int rows, int positions, const Dtype* src, long image_stride,
                                       Dtype* dst) {
  const long long count = static_cast<long long>(images) * rows * positions;
  if (count == 0) return;
  gather_images_kernel<<<cuda::blocks(count), cuda::kThreads>>>(count, images, positions, src, image_stride, dst);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::pack_upper(int k, const Dtype* f, const Dtype* sum, Dtype inv, Dtype* out) {
  const int d = sum ? k + 1 : k;
  if (d == 0) return;
  pack_upper_kernel<<<cuda::blocks(static_cast<long long>(d) * d), cuda::kThreads>>>(k, d, f, sum, inv, out);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::gather_matrix(int rows, int k, bool transposed, const Dtype* w, const Dtype* b, Dtype* m) {
  const long long n = static_cast<long long>(rows) * (b ? k + 1 : k);
  if (n == 0) return;
  matrix_kernel<Dtype, true><<<cuda::blocks(n), cuda::kThreads>>>(rows, k, transposed, const_cast<Dtype*>(w),
                                                                   const_cast<Dtype*>(b), m);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::scatter_matrix(int rows, int k, bool transposed, const Dtype* m, Dtype* w, Dtype* b) {
  const long long n = static_cast<long long>(rows) * (b ? k + 1 : k);
  if (n == 0) return;
  matrix_kernel<Dtype, false><<<cuda::blocks(n), cuda::kThreads>>>(rows, k, transposed, w, b, const_cast<Dtype*>(m));
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::transpose(int rows, int cols, Dtype alpha, const Dtype* x, Dtype* y) {
  const long long n = static_cast<long long>(rows) * cols;
  if (n == 0) return;
  transpose_kernel<<<cuda::blocks(n), cuda::kThreads>>>(rows, cols, alpha, x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::divide_by_eigenvalues(int rows, int cols, const Dtype* dg, const Dtype* da, Dtype damping,
                                               Dtype* m) {
  const long long n = static_cast<long long>(rows) * cols;
  if (n == 0) return;
  divide_kernel<<<cuda::blocks(n), cuda::kThreads>>>(rows, cols, dg, da, damping, m);
  STRATA_CUDA_KERNEL_CHECK();
}

template struct GpuKfacMath<float>;
template struct GpuKfacMath<double>;

}  // namespace strata
