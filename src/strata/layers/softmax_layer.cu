#include <cfloat>

#include "strata/cuda.hpp"
#include "strata/layers/softmax_layer.hpp"

namespace strata {

namespace {

// inner == 1 (the usual classifier case): one warp per contiguous fibre of C values, lanes striding over the
// channels and combining with shuffles, so a 1000-class row is read by 32 threads instead of one.
template <typename Dtype>
__global__ void softmax_rows(int rows, int C, const Dtype* x, Dtype* y) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const Dtype* xr = x + static_cast<long long>(warp) * C;
  Dtype* yr = y + static_cast<long long>(warp) * C;
  Dtype m = -DBL_MAX;
  for (int c = lane; c < C; c += 32) m = max(m, xr[c]);
  for (int o = 16; o > 0; o /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  Dtype s = 0;
  for (int c = lane; c < C; c += 32) {
    const Dtype e = exp(xr[c] - m);
    yr[c] = e;
    s += e;
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  const Dtype inv = Dtype(1) / s;
  for (int c = lane; c < C; c += 32) yr[c] *= inv;
}

template <typename Dtype>
__global__ void softmax_rows_backward(int rows, int C, const Dtype* y, const Dtype* dy, Dtype* dx) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const long long off = static_cast<long long>(warp) * C;
  Dtype d = 0;
  for (int c = lane; c < C; c += 32) d += dy[off + c] * y[off + c];
  for (int o = 16; o > 0; o /= 2) d += __shfl_xor_sync(0xffffffffu, d, o);
  // Every lane has the dot before any writes dx, so dx may be dy (in place).
  for (int c = lane; c < C; c += 32) dx[off + c] = (dy[off + c] - d) * y[off + c];
}

// inner > 1: one thread per strided fibre; neighbouring threads read neighbouring positions (coalesced).
template <typename Dtype>
__global__ void softmax_strided(long long fibres, int C, int inner, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(f, fibres) {
    const long long o = f / inner, i = f % inner;
    const Dtype* xo = x + o * C * inner + i;
    Dtype* yo = y + o * C * inner + i;
    Dtype m = xo[0];
    for (int c = 1; c < C; ++c) m = max(m, xo[static_cast<long long>(c) * inner]);
    Dtype s = 0;
    for (int c = 0; c < C; ++c) {
      const Dtype e = exp(xo[static_cast<long long>(c) * inner] - m);
      yo[static_cast<long long>(c) * inner] = e;
      s += e;
    }
    const Dtype inv = Dtype(1) / s;
    for (int c = 0; c < C; ++c) yo[static_cast<long long>(c) * inner] *= inv;
  }
}

template <typename Dtype>
__global__ void softmax_strided_backward(long long fibres, int C, int inner, const Dtype* y, const Dtype* dy,
                                         Dtype* dx) {
  STRATA_KERNEL_LOOP(f, fibres) {
    const long long base = (f / inner) * C * inner + f % inner;
    Dtype d = 0;
    for (int c = 0; c < C; ++c) d += dy[base + static_cast<long long>(c) * inner] * y[base + static_cast<long long>(c) * inner];
    for (int c = 0; c < C; ++c) {
      const long long k = base + static_cast<long long>(c) * inner;
      dx[k] = (dy[k] - d) * y[k];
    }
  }
}

// One warp per row, uncapped (a grid's x dimension may reach 2^31 - 1 blocks).
inline int warp_blocks(int rows) {
  return static_cast<int>((32LL * rows + cuda::kThreads - 1) / cuda::kThreads);
}

}  // namespace

template <typename Dtype>
void SoftmaxLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int C = channels_;
  if (C == 0 || outer_ == 0 || inner_ == 0) return;
  const Dtype* x = bottom[0]->gpu_data();
  Dtype* y = top[0]->mutable_gpu_data();
  if (inner_ == 1) {
    softmax_rows<<<warp_blocks(outer_), cuda::kThreads>>>(outer_, C, x, y);
  } else {
    const long long fibres = static_cast<long long>(outer_) * inner_;
    softmax_strided<<<cuda::blocks(fibres), cuda::kThreads>>>(fibres, C, inner_, x, y);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int C = channels_;
  if (C == 0 || outer_ == 0 || inner_ == 0) return;
  const Dtype* y = top[0]->gpu_data();
  const Dtype* dy = top[0]->gpu_diff();
  Dtype* dx = bottom[0]->mutable_gpu_diff();
  if (inner_ == 1) {
    softmax_rows_backward<<<warp_blocks(outer_), cuda::kThreads>>>(outer_, C, y, dy, dx);
  } else {
    const long long fibres = static_cast<long long>(outer_) * inner_;
    softmax_strided_backward<<<cuda::blocks(fibres), cuda::kThreads>>>(fibres, C, inner_, y, dy, dx);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SoftmaxLayer);

}  // namespace strata
