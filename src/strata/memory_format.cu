// The device's conversions between a float blob's formats (memory_format.hpp): float and bfloat16 one thread per
// value, with the rounding the CPU's reference uses (to_bf16); channels-first and channels-last as a transpose of
// each image's C x S matrix through shared-memory tiles (converting the element type on the way, where it changes),
// so that both the reads and the writes are coalesced.
#include <algorithm>

#include "strata/cuda.hpp"
#include "strata/memory_format.hpp"

namespace strata {

namespace {

__global__ void to_bf16_kernel(long long n, const float* x, bfloat16* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = to_bf16(x[i]);
}

__global__ void from_bf16_kernel(long long n, const bfloat16* x, float* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = from_bf16(x[i]);
}

constexpr int kTile = 32, kTileRows = 8;

// y[n] = x[n]^T for every image n, x[n] a rows x cols matrix, each value converted from In to Out on the way. The
// grid's x runs over the tiles of the longer side (`rows_on_x`): y and z stop at 65,535, and an image's positions
// (a side once channels-last goes back) may need more tiles than that.
template <typename In, typename Out>
__global__ void transpose_images(int images, int rows, int cols, bool rows_on_x, const In* x, Out* y) {
  __shared__ float tile[kTile][kTile + 1];  // +1: a column of the tile falls in 32 different banks
  const long long image = static_cast<long long>(rows) * cols;
  const int r0 = (rows_on_x ? blockIdx.x : blockIdx.y) * kTile, c0 = (rows_on_x ? blockIdx.y : blockIdx.x) * kTile;
  for (int n = blockIdx.z; n < images; n += gridDim.z) {
    const In* src = x + n * image;
    Out* dst = y + n * image;
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int r = r0 + j, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[j][threadIdx.x] = value_of(src[static_cast<long long>(r) * cols + c]);
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int c = c0 + j, r = r0 + threadIdx.x;
      if (c < cols && r < rows) put(&dst[static_cast<long long>(c) * rows + r], tile[threadIdx.x][j]);
    }
    __syncthreads();
  }
}

template <typename In, typename Out>
void transpose(int images, int rows, int cols, const void* x, void* y) {
  if (images <= 0 || rows <= 0 || cols <= 0) return;
  const unsigned row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const bool rows_on_x = row_tiles > col_tiles;
  const dim3 grid(rows_on_x ? row_tiles : col_tiles, rows_on_x ? col_tiles : row_tiles, std::min(images, 65535));
  CHECK_LE(grid.y, 65535u) << "an image of " << rows << " x " << cols << " values is too large to transpose";
  transpose_images<<<grid, dim3(kTile, kTileRows)>>>(images, rows, cols, rows_on_x, static_cast<const In*>(x),
                                                      static_cast<Out*>(y));
  STRATA_CUDA_KERNEL_CHECK();
}

}  // namespace

void gpu_to_bf16(size_t n, const float* x, bfloat16* y) {
  if (n == 0) return;
  to_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_from_bf16(size_t n, const bfloat16* x, float* y) {
  if (n == 0) return;
  from_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x, y);
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_reformat(size_t n, const LayoutShape& shape, DeviceFormat from, const void* x, DeviceFormat to, void* y) {
  const int N = shape.num, C = shape.channels, S = shape.spatial;
  CHECK(from != to) << "gpu_reformat: nothing to convert";
  const bool to_last = is_channels_last(to);
  if (to_last == is_channels_last(from)) {
    // The same order: the element type changes, value by value.
    if (is_bf16(to)) return gpu_to_bf16(n, static_cast<const float*>(x), static_cast<bfloat16*>(y));
    return gpu_from_bf16(n, static_cast<const bfloat16*>(x), static_cast<float*>(y));
  }
  CHECK_EQ(shape.count(), n) << "a channels-last conversion of " << n << " values for a shape of " << shape.count();
  // To channels-last, each image's C x S becomes S x C; back, S x C becomes C x S.
  const int rows = to_last ? C : S, cols = to_last ? S : C;
  if (is_bf16(from)) {
    if (is_bf16(to)) return transpose<bfloat16, bfloat16>(N, rows, cols, x, y);
    return transpose<bfloat16, float>(N, rows, cols, x, y);
  }
  if (is_bf16(to)) return transpose<float, bfloat16>(N, rows, cols, x, y);
  transpose<float, float>(N, rows, cols, x, y);
}

}  // namespace strata
