// The device's conversions between a float blob's formats (memory_format.hpp): float and a 16-bit type one thread
// per value, with the rounding the CPU's reference uses (to_bf16, to_fp16); channels-first and channels-last as a
// transpose of each image's C x S matrix through shared-memory tiles (converting the element type on the way, where
// it changes), so that both the reads and the writes are coalesced.
#include <algorithm>

#include "strata/cuda.hpp"
#include "strata/memory_format.hpp"

namespace strata {

namespace {

template <typename In, typename Out>
__global__ void convert_kernel(long long n, const In* x, Out* y) {
  STRATA_KERNEL_LOOP(i, n) put(&y[i], value_of(x[i]));
}

template <typename In, typename Out>
void convert(size_t n, const void* x, void* y) {
  if (n == 0) return;
  convert_kernel<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), static_cast<const In*>(x),
                                                      static_cast<Out*>(y));
  STRATA_CUDA_KERNEL_CHECK();
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

// Runs op(T{}) with T the type a float blob's memory holds its values as in format f.
template <typename Op>
void with_element_type(DeviceFormat f, Op op) {
  switch (element_type_of(f)) {
    case ElementType::kBf16: return op(bfloat16{});
    case ElementType::kFp16: return op(float16{});
    case ElementType::kOwn: return op(float{});
  }
}

}  // namespace

void gpu_reformat(size_t n, const LayoutShape& shape, DeviceFormat from, const void* x, DeviceFormat to, void* y) {
  const int N = shape.num, C = shape.channels, S = shape.spatial;
  CHECK(from != to) << "gpu_reformat: nothing to convert";
  const bool to_last = is_channels_last(to), same_order = to_last == is_channels_last(from);
  if (!same_order) {
    CHECK_EQ(shape.count(), n) << "a channels-last conversion of " << n << " values for a shape of " << shape.count();
  }
  // To channels-last, each image's C x S becomes S x C; back, S x C becomes C x S.
  const int rows = to_last ? C : S, cols = to_last ? S : C;
  with_element_type(from, [&](auto in) {
    with_element_type(to, [&](auto out) {
      using In = decltype(in);
      using Out = decltype(out);
      if (same_order) {
        convert<In, Out>(n, x, y);  // the element type changes, value by value
      } else {
        transpose<In, Out>(N, rows, cols, x, y);
      }
    });
  });
}

}  // namespace strata
