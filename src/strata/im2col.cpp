#include "strata/im2col.hpp"


#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "strata/blob.hpp"
#include "strata/math_functions.hpp"
#include "strata/parallel.hpp"

namespace strata {

namespace {

// ceil(a / b) for b > 0 and any sign of a.
inline int ceil_div(int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The output positions [lo, hi) whose input coordinate o*stride + offset lands inside [0, size).
inline void valid_range(int offset, int stride, int size, int out, int* lo, int* hi) {
  *lo = std::min(std::max(ceil_div(-offset, stride), 0), out);
  *hi = std::max(std::min(ceil_div(size - offset, stride), out), *lo);
}

// Unfolds (or, with kAdd, folds back) the kernel_h*kernel_w rows of one channel. Each (i, j) kernel offset is a
// row; within it, output row oh reads one input row, over the output columns whose input is inside the image:
// a contiguous copy at stride 1, a strided gather otherwise. Positions in the padding are zero (im2col) or
// skipped (col2im).
template <typename Dtype, bool kFold>
void unfold_channel(Dtype* im, const ConvGeometry& g, int out_h, int out_w, Dtype* col, int col_stride) {
  const int H = g.height, W = g.width, sw = g.stride_w;
  for (int i = 0; i < g.kernel_h; ++i) {
    const int ih0 = i * g.dilation_h - g.pad_h;  // input row of output row oh is oh*stride_h + ih0
    int oh_lo, oh_hi;
    valid_range(ih0, g.stride_h, H, out_h, &oh_lo, &oh_hi);
    for (int j = 0; j < g.kernel_w; ++j, col += col_stride) {
      const int iw0 = j * g.dilation_w - g.pad_w;
      int ow_lo, ow_hi;
      valid_range(iw0, sw, W, out_w, &ow_lo, &ow_hi);
      const int n = ow_hi - ow_lo;
      if (n == 0 || oh_lo == oh_hi) {  // this kernel offset sees only padding
        if (!kFold) std::memset(col, 0, sizeof(Dtype) * out_h * out_w);
        continue;
      }
      if (!kFold) {
        std::memset(col, 0, sizeof(Dtype) * oh_lo * out_w);
        std::memset(col + oh_hi * out_w, 0, sizeof(Dtype) * (out_h - oh_hi) * out_w);
      }
      for (int oh = oh_lo; oh < oh_hi; ++oh) {
        Dtype* c = col + oh * out_w + ow_lo;
        Dtype* x = im + (oh * g.stride_h + ih0) * W + ow_lo * sw + iw0;
        if (!kFold) {
          std::memset(col + oh * out_w, 0, sizeof(Dtype) * ow_lo);
          std::memset(c + n, 0, sizeof(Dtype) * (out_w - ow_hi));
          if (sw == 1) {
            std::memcpy(c, x, sizeof(Dtype) * n);
          } else {
            for (int k = 0; k < n; ++k) c[k] = x[k * sw];
          }
        } else if (sw == 1) {
          for (int k = 0; k < n; ++k) x[k] += c[k];
        } else {
          for (int k = 0; k < n; ++k) x[k * sw] += c[k];
        }
      }
    }
  }
}

// One channel of one image, either direction. A pointwise window maps the channel to one row unchanged.
template <typename Dtype, bool kFold>
void unfold_one(Dtype* im, const ConvGeometry& g, int out_h, int out_w, Dtype* col, int col_stride) {
  if (g.is_pointwise()) {
    const int hw = g.height * g.width;
    if (kFold) {
      std::memcpy(im, col, sizeof(Dtype) * hw);
    } else {
      std::memcpy(col, im, sizeof(Dtype) * hw);
    }
    return;
  }
  if (kFold) std::memset(im, 0, sizeof(Dtype) * g.height * g.width);
  unfold_channel<Dtype, kFold>(im, g, out_h, out_w, col, col_stride);
}

template <typename Dtype, bool kFold>
void unfold(Dtype* im, const ConvGeometry& g, int num, Dtype* col, int col_stride) {
  const int out_h = g.out_h(), out_w = g.out_w();
  const int out_count = out_h * out_w;
  if (col_stride <= 0) col_stride = num * out_count;
  const int C = g.channels;
  const long image = static_cast<long>(g.height) * g.width;
  const long rows_per_channel = static_cast<long>(g.kernel_h) * g.kernel_w;
  const long work = static_cast<long>(num) * C * rows_per_channel * out_count;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worthwhile(work))
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < C; ++c) {
      unfold_one<Dtype, kFold>(im + (static_cast<long>(n) * C + c) * image, g, out_h, out_w,
                               col + c * rows_per_channel * col_stride + static_cast<long>(n) * out_count,
                               col_stride);
    }
  }
}

}  // namespace

template <typename Dtype>
void im2col_cpu(const Dtype* data_im, const ConvGeometry& g, Dtype* data_col, int col_stride) {
  unfold<Dtype, false>(const_cast<Dtype*>(data_im), g, 1, data_col, col_stride);
}

template <typename Dtype>
void col2im_cpu(const Dtype* data_col, const ConvGeometry& g, Dtype* data_im, int col_stride) {
  unfold<Dtype, true>(data_im, g, 1, const_cast<Dtype*>(data_col), col_stride);
}

template <typename Dtype>
void im2col_batch_cpu(const Dtype* data_im, const ConvGeometry& g, int num, Dtype* data_col) {
  unfold<Dtype, false>(const_cast<Dtype*>(data_im), g, num, data_col, 0);
}

template <typename Dtype>
void col2im_batch_cpu(const Dtype* data_col, const ConvGeometry& g, int num, Dtype* data_im) {
  unfold<Dtype, true>(data_im, g, num, const_cast<Dtype*>(data_col), 0);
}

template <typename Dtype>
Dtype* thread_workspace(size_t count) {
  thread_local Blob<Dtype> workspace;
  if (count == 0) return nullptr;
  CHECK_LE(count, static_cast<size_t>(INT_MAX)) << "workspace request too large";
  if (workspace.count() < static_cast<int>(count)) {
    workspace.set_memory_category(MemoryCategory::kWorkspace);
    workspace.Reshape({static_cast<int>(count)});
  }
  return workspace.mutable_cpu_data();
}

#define STRATA_INSTANTIATE_IM2COL(Dtype)                                                        \
  template void im2col_cpu<Dtype>(const Dtype*, const ConvGeometry&, Dtype*, int);               \
  template void col2im_cpu<Dtype>(const Dtype*, const ConvGeometry&, Dtype*, int);               \
  template void im2col_batch_cpu<Dtype>(const Dtype*, const ConvGeometry&, int, Dtype*);         \
  template void col2im_batch_cpu<Dtype>(const Dtype*, const ConvGeometry&, int, Dtype*);         \
  template Dtype* thread_workspace<Dtype>(size_t)

STRATA_INSTANTIATE_IM2COL(float);
STRATA_INSTANTIATE_IM2COL(double);

}  // namespace strata
