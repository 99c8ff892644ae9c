#include "coupling_math.hpp"
#include "strata/cuda.hpp"

namespace strata {

namespace {

// op(row, element) over rows x width: the grid's y covers the rows and its x a row's elements, so no thread
// divides to find its row (a 64-bit division per element made kernels like these bound by arithmetic).
template <typename Op>
__global__ void rows_kernel(int rows, long long width, Op op) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    for (long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; e < width;
         e += static_cast<long long>(blockDim.x) * gridDim.x) {
      op(r, e);
    }
  }
}

template <typename Op>
void ForRows(int rows, long width, Op op) {
  if (rows <= 0 || width <= 0) return;
  const int y = std::min(rows, 65535);
  // About as many blocks in all as cuda::blocks gives one long vector.
  const int x = std::max(1, std::min(cuda::blocks(width), 65536 / y));
  rows_kernel<<<dim3(x, y), cuda::kThreads>>>(rows, width, op);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace

template <typename Dtype>
void GpuCoupling<Dtype>::copy(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y) {
  if (rows <= 0 || width <= 0) return;
  STRATA_CUDA_CHECK(cudaMemcpy2DAsync(y.p, sizeof(Dtype) * y.pitch, x.p, sizeof(Dtype) * x.pitch,
                                      sizeof(Dtype) * width, rows, cudaMemcpyDeviceToDevice, 0));
}

template <typename Dtype>
void GpuCoupling<Dtype>::couple(int rows, long width, Dtype gamma, Rows<const Dtype*> f, Rows<const Dtype*> older,
                                Rows<Dtype*> newer) {
  ForRows(rows, width, [=] __device__(int r, long long e) {
    newer.p[r * newer.pitch + e] = f.p[r * f.pitch + e] + gamma * older.p[r * older.pitch + e];
  });
}

template <typename Dtype>
void GpuCoupling<Dtype>::uncouple(int rows, long width, Dtype gamma, Rows<const Dtype*> newer, Rows<const Dtype*> f,
                                  Rows<Dtype*> older) {
  ForRows(rows, width, [=] __device__(int r, long long e) {
    older.p[r * older.pitch + e] = (newer.p[r * newer.pitch + e] - f.p[r * f.pitch + e]) / gamma;
  });
}

template <typename Dtype>
void GpuCoupling<Dtype>::scale(int rows, long width, Dtype gamma, Rows<const Dtype*> x, Rows<Dtype*> y) {
  ForRows(rows, width, [=] __device__(int r, long long e) { y.p[r * y.pitch + e] = gamma * x.p[r * x.pitch + e]; });
}

template <typename Dtype>
void GpuCoupling<Dtype>::add(int rows, long width, Rows<const Dtype*> x, Rows<Dtype*> y) {
  ForRows(rows, width, [=] __device__(int r, long long e) { y.p[r * y.pitch + e] += x.p[r * x.pitch + e]; });
}

template struct GpuCoupling<float>;
template struct GpuCoupling<double>;

}  // namespace strata
