// im2col_batch_gpu (strata/im2col.hpp): the column matrix of several images side by side, as im2col_batch_cpu
// lays it out.
#include "strata/cuda.hpp"
#include "strata/im2col.hpp"
#include "strata/im2col.cuh"

namespace strata {

namespace {

// col[row][n * OH*OW + oh*OW + ow] = x[n][c][oh*sh - ph + i*dh][ow*sw - pw + j*dw] for row = (c*kh + i)*kw + j,
// 0 in the padding; one thread per entry, consecutive threads along a row (coalesced writes).
template <typename Dtype>
__global__ void im2col_batch_kernel(long long count, const Dtype* x, ConvGeometry g, int num, int out_h, int out_w,
                                    Dtype* col) {
  const long long positions = static_cast<long long>(out_h) * out_w;
  const long long width = positions * num;
  const long long image_dim = static_cast<long long>(g.channels) * g.height * g.width;
  STRATA_KERNEL_LOOP(index, count) {
    const long long row = index / width, column = index % width;
    const long long n = column / positions, p = column % positions;
    const int oh = static_cast<int>(p / out_w), ow = static_cast<int>(p % out_w);
    const long long at = im2col_source(g, row, oh, ow);
    col[index] = at >= 0 ? x[n * image_dim + at] : Dtype(0);
  }
}

}  // namespace

template <typename Dtype>
void im2col_batch_gpu(const Dtype* data_im, const ConvGeometry& g, int num, Dtype* data_col) {
  const long long count = static_cast<long long>(g.col_rows()) * g.out_count() * num;
  if (count == 0) return;
  im2col_batch_kernel<<<cuda::blocks(count), cuda::kThreads>>>(count, data_im, g, num, g.out_h(), g.out_w(),
                                                               data_col);
  STRATA_CUDA_KERNEL_CHECK();
}

template void im2col_batch_gpu<float>(const float*, const ConvGeometry&, int, float*);
template void im2col_batch_gpu<double>(const double*, const ConvGeometry&, int, double*);

}  // namespace strata
