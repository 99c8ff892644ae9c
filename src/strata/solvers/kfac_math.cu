// GpuKfacMath's kernels (kfac_math.hpp): one launch each on the compute stream, one thread per output element
// (block_dots: one thread block per range).
#include "kfac_math.hpp"

#include <vector>

#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
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

// One thread block per range: its threads' partial sums (double), then a tree in shared memory.
template <typename Dtype>
__global__ void block_dots_kernel(const long long* ranges, const Dtype* x, const Dtype* y, double* out) {
  __shared__ double partial[cuda::kThreads];
  const long long start = ranges[2 * blockIdx.x], size = ranges[2 * blockIdx.x + 1];
  double s = 0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) s += static_cast<double>(x[start + i]) * y[start + i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

template <typename Dtype>
__global__ void finite_kernel(long long n, const Dtype* x, int* bad) {
  STRATA_KERNEL_LOOP(index, n) {
    if (!isfinite(x[index])) *bad = 1;
  }
}

template <typename Dtype>
__global__ void convert_kernel(long long n, const double* x, Dtype* y) {
  STRATA_KERNEL_LOOP(index, n) { y[index] = static_cast<Dtype>(x[index]); }
}

__global__ void add_diagonal_kernel(int n, double lambda, double* m) {
  STRATA_KERNEL_LOOP(i, n) { m[i * n + i] += lambda; }
}

__global__ void divide_columns_kernel(int n, const double* v, double* m) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(n) * n) { m[index] /= v[index % n]; }
}

// The row-major lower triangle from the upper one (cuSOLVER's column-major lower).
__global__ void symmetrize_kernel(int n, double* m) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(n) * n) {
    const long long i = index / n, j = index % n;
    if (i > j) m[index] = m[j * n + i];
  }
}

__global__ void transpose_square_kernel(int n, const double* x, double* y) {
  STRATA_KERNEL_LOOP(index, static_cast<long long>(n) * n) { y[index] = x[(index % n) * n + index / n]; }
}

// Device scratch from the pool for one solver call (cudaFree would wait for the whole device).
class Scratch {
 public:
  explicit Scratch(size_t bytes) : p_(cuda::device_alloc(bytes)) {}
  ~Scratch() { cuda::device_free(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_;
};

// cuSOLVER's info: 0 on success (it waits for the device).
bool succeeded(const int* info) {
  int host = -1;
  STRATA_CUDA_CHECK(cudaMemcpy(&host, info, sizeof(int), cudaMemcpyDeviceToHost));
  return host == 0;
}

}  // namespace

// A symmetric row-major matrix is its own column-major transpose, so cuSOLVER's column-major lower triangle is the
// row-major upper one that LAPACK's row-major 'U' names on the host.
bool cusolver_cholesky_inverse(int n, double* m) {
  cusolverDnHandle_t handle = cuda::cusolver();
  int potrf = 0, potri = 0;
  STRATA_CUSOLVER(cusolverDnDpotrf_bufferSize, handle, CUBLAS_FILL_MODE_LOWER, n, m, n, &potrf);
  STRATA_CUSOLVER(cusolverDnDpotri_bufferSize, handle, CUBLAS_FILL_MODE_LOWER, n, m, n, &potri);
  const int work = std::max(potrf, potri);
  Scratch scratch(sizeof(double) * std::max(work, 1) + sizeof(int));
  double* buffer = scratch.as<double>();
  int* info = reinterpret_cast<int*>(buffer + std::max(work, 1));
  STRATA_CUSOLVER(cusolverDnDpotrf, handle, CUBLAS_FILL_MODE_LOWER, n, m, n, buffer, work, info);
  if (!succeeded(info)) return false;
  STRATA_CUSOLVER(cusolverDnDpotri, handle, CUBLAS_FILL_MODE_LOWER, n, m, n, buffer, work, info);
  if (!succeeded(info)) return false;
  symmetrize_kernel<<<cuda::blocks(static_cast<long long>(n) * n), cuda::kThreads>>>(n, m);
  STRATA_CUDA_KERNEL_CHECK();
  return GpuKfacMath<double>::all_finite(n * n, m);
}

// cuSOLVER leaves the eigenvectors as column-major columns, which are row-major rows: transposed into columns,
// as LAPACK's row-major call leaves them.
bool cusolver_symmetric_eigen(int n, double* m, double* values) {
  cusolverDnHandle_t handle = cuda::cusolver();
  int work = 0;
  STRATA_CUSOLVER(cusolverDnDsyevd_bufferSize, handle, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, m, n,
                  values, &work);
  const long long size = static_cast<long long>(n) * n;
  Scratch scratch(sizeof(double) * (std::max(work, 1) + size) + sizeof(int));
  double* buffer = scratch.as<double>();
  double* rows = buffer + std::max(work, 1);
  int* info = reinterpret_cast<int*>(rows + size);
  STRATA_CUSOLVER(cusolverDnDsyevd, handle, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, m, n, values, buffer,
                  work, info);
  if (!succeeded(info)) return false;
  STRATA_CUDA_CHECK(cudaMemcpy(rows, m, sizeof(double) * size, cudaMemcpyDeviceToDevice));
  transpose_square_kernel<<<cuda::blocks(size), cuda::kThreads>>>(n, rows, m);
  STRATA_CUDA_KERNEL_CHECK();
  return GpuKfacMath<double>::all_finite(n * n, m) && GpuKfacMath<double>::all_finite(n, values);
}

void gpu_add_diagonal(int n, double lambda, double* m) {
  if (n == 0) return;
  add_diagonal_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, lambda, m);
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_divide_columns(int n, const double* v, double* m) {
  if (n == 0) return;
  divide_columns_kernel<<<cuda::blocks(static_cast<long long>(n) * n), cuda::kThreads>>>(n, v, m);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void GpuKfacMath<Dtype>::convert(int n, const double* x, Dtype* y) {
  if (n <= 0) return;
  convert_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
bool GpuKfacMath<Dtype>::all_finite(int n, const Dtype* x) {
  if (n <= 0) return true;
  Scratch bad(sizeof(int));
  STRATA_CUDA_CHECK(cudaMemset(bad.as<int>(), 0, sizeof(int)));
  finite_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, bad.as<int>());
  STRATA_CUDA_KERNEL_CHECK();
  int host = 0;
  STRATA_CUDA_CHECK(cudaMemcpy(&host, bad.as<int>(), sizeof(int), cudaMemcpyDeviceToHost));
  return host == 0;
}

template <typename Dtype>
void GpuKfacMath<Dtype>::block_dots(int blocks, const int* starts, const int* sizes, const Dtype* x, const Dtype* y,
                                    double* out) {
  if (blocks <= 0) return;
  std::vector<long long> ranges(2 * static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) {
    ranges[2 * b] = starts[b];
    ranges[2 * b + 1] = sizes[b];
  }
  Scratch scratch(sizeof(long long) * ranges.size() + sizeof(double) * blocks);
  long long* device_ranges = scratch.as<long long>();
  double* dots = reinterpret_cast<double*>(device_ranges + ranges.size());
  STRATA_CUDA_CHECK(cudaMemcpy(device_ranges, ranges.data(), sizeof(long long) * ranges.size(),
                               cudaMemcpyHostToDevice));
  block_dots_kernel<<<blocks, cuda::kThreads>>>(device_ranges, x, y, dots);
  STRATA_CUDA_KERNEL_CHECK();
  STRATA_CUDA_CHECK(cudaMemcpy(out, dots, sizeof(double) * blocks, cudaMemcpyDeviceToHost));
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

template <typename Dtype>
void GpuKfacMath<Dtype>::upload(int n, const Dtype* host, Dtype* y) {
  STRATA_CUDA_CHECK(cudaMemcpy(y, host, sizeof(Dtype) * n, cudaMemcpyHostToDevice));
}

template <typename Dtype>
void GpuKfacMath<Dtype>::download(int n, const Dtype* x, Dtype* host) {
  STRATA_CUDA_CHECK(cudaMemcpy(host, x, sizeof(Dtype) * n, cudaMemcpyDeviceToHost));
}

template struct GpuKfacMath<float>;
template struct GpuKfacMath<double>;

}  // namespace strata
