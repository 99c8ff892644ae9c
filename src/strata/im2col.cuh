// The one rule of the GPU's im2col kernels (im2col.cu, layers/im2col_layer.cu), private to src/strata: which pixel
// of an image a column entry reads.
#pragma once

#include "strata/im2col.hpp"

namespace strata {

// The offset within one image (channels x height x width) that the column matrix's row (c*kh + i)*kw + j reads at
// output position (oh, ow), or -1 where the window lies in the padding.
__device__ inline long long im2col_source(const ConvGeometry& g, long long row, int oh, int ow) {
  const int j = static_cast<int>(row % g.kernel_w);
  const int i = static_cast<int>((row / g.kernel_w) % g.kernel_h);
  const int c = static_cast<int>(row / (g.kernel_w * g.kernel_h));
  const int ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
  const int iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
  if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) return -1;
  return (static_cast<long long>(c) * g.height + ih) * g.width + iw;
}

}  // namespace strata
