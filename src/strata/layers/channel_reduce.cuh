// Per-channel sums on the GPU, shared by Bias, Scale and BatchNorm (private to src/strata/layers).
//
// A blob seen as (outer, dim, inner) is summed over outer x inner for every d (with inner 1, as channels-last
// blobs are, by columns: column_partials). One block per channel leaves most
// of the GPU idle when there are few channels with many values each (ResNet's first BatchNorm: 64 channels of
// 800,000 values), so each channel is split over several blocks that write partial sums, and a second kernel adds
// each channel's partials in a fixed order: deterministic, no atomics. Sums are in double, as on the CPU.
#pragma once

#include <algorithm>

#include "strata/cuda.hpp"

namespace strata {
namespace channel_reduce_detail {

constexpr int kTarget = 1024;  // blocks to aim for: several per multiprocessor
constexpr int kMinPerBlock = 2048;

// Index is unsigned where the whole blob fits in 32 bits: the division per value then costs a fraction of a
// 64-bit one, which would bound these kernels instead of memory.
template <typename Index, typename F>
__global__ void partials(Index per_d, int dim, Index inner, Index chunk, int splits, F f, double2* out) {
  __shared__ double s0[cuda::kThreads], s1[cuda::kThreads];
  const int d = blockIdx.x, s = blockIdx.y;  // channels on x: up to 2^31 - 1 of them
  const Index begin = s * chunk, end = min(per_d, begin + chunk);
  double a = 0, b = 0;
  for (Index j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const Index k = ((j / inner) * dim + d) * inner + j % inner;
    const double2 v = f(static_cast<long long>(k), d);
    a += v.x;
    b += v.y;
  }
  s0[threadIdx.x] = a;
  s1[threadIdx.x] = b;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      s0[threadIdx.x] += s0[threadIdx.x + w];
      s1[threadIdx.x] += s1[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[static_cast<long long>(d) * splits + s] = make_double2(s0[0], s1[0]);
}

// inner == 1 (channels-last activations, a bias's gradient over rows): rows of dim values, a channel per column. A
// block takes kColumns neighbouring channels over a run of rows, so that a warp reads kColumns adjacent values of a
// row at once (coalesced, where a block per channel would read one value per row); its kLanes row lanes are then
// added in a fixed order.
constexpr int kColumns = 32, kLanes = 8, kMinRowsPerBlock = 256;

template <typename Index, typename F>
__global__ void column_partials(Index rows, int dim, Index chunk, int splits, F f, double2* out) {
  __shared__ double s0[kLanes][kColumns], s1[kLanes][kColumns];
  const int d = blockIdx.x * kColumns + threadIdx.x, s = blockIdx.y;
  const Index begin = s * chunk, end = min(rows, begin + chunk);
  double a = 0, b = 0;
  if (d < dim) {
    for (Index r = begin + threadIdx.y; r < end; r += kLanes) {
      const double2 v = f(static_cast<long long>(r) * dim + d, d);
      a += v.x;
      b += v.y;
    }
  }
  s0[threadIdx.y][threadIdx.x] = a;
  s1[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && d < dim) {
    for (int lane = 1; lane < kLanes; ++lane) {
      a += s0[lane][threadIdx.x];
      b += s1[lane][threadIdx.x];
    }
    out[static_cast<long long>(d) * splits + s] = make_double2(a, b);
  }
}

template <typename G>
__global__ void finish(int dim, int splits, const double2* in, G g) {
  STRATA_KERNEL_LOOP(d, dim) {
    double a = 0, b = 0;
    for (int s = 0; s < splits; ++s) {
      a += in[d * splits + s].x;
      b += in[d * splits + s].y;
    }
    g(static_cast<int>(d), a, b);
  }
}

}  // namespace channel_reduce_detail

// For every channel d: (sum0, sum1) = sum over its values k of f(k, d) (a double2), then finish(d, sum0, sum1)
// once. f and finish are __device__ lambdas. Uses the calling thread's workspace.
template <typename F, typename G>
void channel_reduce(int outer, int dim, int inner, F f, G finish) {
  using namespace channel_reduce_detail;
  if (dim == 0) return;
  const long long per_d = static_cast<long long>(outer) * inner;
  if (inner == 1 && dim > 1) {
    const int column_blocks = (dim + kColumns - 1) / kColumns;
    const long long by_rows = std::max(1LL, per_d / kMinRowsPerBlock);
    const int splits = static_cast<int>(std::min<long long>(
        {by_rows, static_cast<long long>(std::max(1, kTarget / column_blocks)), 65535LL}));
    const long long chunk = (per_d + splits - 1) / splits;
    double2* partial = static_cast<double2*>(cuda::workspace(sizeof(double2) * dim * splits));
    const dim3 grid(column_blocks, splits), block(kColumns, kLanes);
    if (per_d * dim < (1LL << 31)) {
      column_partials<unsigned><<<grid, block>>>(static_cast<unsigned>(per_d), dim, static_cast<unsigned>(chunk),
                                                  splits, f, partial);
    } else {
      column_partials<long long><<<grid, block>>>(per_d, dim, chunk, splits, f, partial);
    }
    STRATA_CUDA_KERNEL_CHECK();
    channel_reduce_detail::finish<<<cuda::blocks(dim), cuda::kThreads>>>(dim, splits, partial, finish);
    STRATA_CUDA_KERNEL_CHECK();
    return;
  }
  const long long by_size = std::max(1LL, per_d / kMinPerBlock);
  const int splits = static_cast<int>(std::max(1LL, std::min(by_size, static_cast<long long>((kTarget + dim - 1) / dim))));
  const long long chunk = (per_d + splits - 1) / splits;
  double2* partial = static_cast<double2*>(cuda::workspace(sizeof(double2) * dim * splits));
  if (per_d * dim < (1LL << 31)) {
    partials<unsigned><<<dim3(dim, splits), cuda::kThreads>>>(static_cast<unsigned>(per_d), dim,
                                                               static_cast<unsigned>(inner),
                                                               static_cast<unsigned>(chunk), splits, f, partial);
  } else {
    partials<long long><<<dim3(dim, splits), cuda::kThreads>>>(per_d, dim, static_cast<long long>(inner), chunk,
                                                                splits, f, partial);
  }
  STRATA_CUDA_KERNEL_CHECK();
  channel_reduce_detail::finish<<<cuda::blocks(dim), cuda::kThreads>>>(dim, splits, partial, finish);
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace strata
