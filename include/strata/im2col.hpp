// im2col / col2im: the unfolding that turns a 2-D convolution into a matrix product.
//
// For an image of C x H x W, the column matrix has C*kernel_h*kernel_w rows and out_h*out_w columns:
//   col[(c*kernel_h + i)*kernel_w + j][oh*out_w + ow] = x[c][oh*stride_h - pad_h + i*dilation_h]
//                                                          [ow*stride_w - pad_w + j*dilation_w]
// (0 where that falls in the padding). col2im is its adjoint: every column entry is added back to the pixel it
// came from. Rows of the column matrix may be longer than out_h*out_w (`col_stride`), so that several images can
// be unfolded side by side into one matrix and multiplied by the weights in a single GEMM.
#pragma once

#include "strata/common.hpp"

namespace strata {

// The geometry of a 2-D convolution window over one image.
struct ConvGeometry {
  int channels = 0, height = 0, width = 0;
  int kernel_h = 1, kernel_w = 1;
  int pad_h = 0, pad_w = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;

  // Caffe's rule: (H + 2p - (d(k-1)+1)) / s + 1, rounding down.
  int out_h() const { return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1; }
  int out_w() const { return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1; }
  int out_count() const { return out_h() * out_w(); }
  // Rows of the column matrix.
  int col_rows() const { return channels * kernel_h * kernel_w; }
  // A 1x1 window with unit stride and no padding: the column matrix is the image itself.
  bool is_pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

// Unfolds one image into `data_col`, whose rows are `col_stride` apart (0 means out_h*out_w).
template <typename Dtype>
void im2col_cpu(const Dtype* data_im, const ConvGeometry& g, Dtype* data_col, int col_stride = 0);

// The adjoint: data_im (overwritten) = the sum of every column entry at the pixel it was read from.
template <typename Dtype>
void col2im_cpu(const Dtype* data_col, const ConvGeometry& g, Dtype* data_im, int col_stride = 0);

// `num` consecutive images (each channels x height x width) unfolded side by side into one matrix of
// col_rows() x (num * out_h*out_w): image n's columns start at column n * out_h*out_w. Parallel over images and
// channels (OpenMP) when an OpenMP region between GEMMs is cheap: OpenBLAS built on OpenMP, or
// OMP_WAIT_POLICY=passive (or a small GOMP_SPINCOUNT) in the environment; serial otherwise, since libgomp's
// default spin-waiting worker would hold up the next GEMM's OpenBLAS thread for milliseconds.
template <typename Dtype>
void im2col_batch_cpu(const Dtype* data_im, const ConvGeometry& g, int num, Dtype* data_col);

// The adjoint of im2col_batch_cpu: overwrites the `num` images.
template <typename Dtype>
void col2im_batch_cpu(const Dtype* data_col, const ConvGeometry& g, int num, Dtype* data_im);

#ifdef STRATA_USE_CUDA
// im2col_batch_cpu on the device (im2col.cu): one thread per column entry, on the compute stream.
template <typename Dtype>
void im2col_batch_gpu(const Dtype* data_im, const ConvGeometry& g, int num, Dtype* data_col);
#endif

// Scratch memory for column matrices, shared by every layer that runs on the calling thread. Layers on one
// thread run one at a time and keep nothing in it between calls, so one buffer (as large as the largest
// request, never shrinking, counted as MemoryCategory::kWorkspace) serves all the convolutions of a net instead
// of one buffer per layer. The pointer is valid until the next call on this thread.
template <typename Dtype>
Dtype* thread_workspace(size_t count);

}  // namespace strata
