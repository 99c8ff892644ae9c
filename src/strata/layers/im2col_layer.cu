// Im2col on the GPU, all images in one launch: one thread per column entry unfolds, one thread per input pixel
// folds back (summing the entries read from it, so no atomics and a fixed summation order).
#include "strata/cuda.hpp"
#include "strata/im2col.cuh"
#include "strata/layers/im2col_layer.hpp"

namespace strata {

namespace {

// Every image at once: image n's col[((c*kh + i)*kw + j) * OH*OW + oh*OW + ow] =
// x[n][c][oh*sh - ph + i*dh][ow*sw - pw + j*dw], 0 in the padding. `n` counts the entries of all images.
template <typename Dtype>
__global__ void im2col_kernel(long long n, const Dtype* x, ConvGeometry g, int out_h, int out_w, Dtype* col) {
  const long long image_dim = static_cast<long long>(g.channels) * g.height * g.width;
  const long long col_dim = static_cast<long long>(g.channels) * g.kernel_h * g.kernel_w * out_h * out_w;
  STRATA_KERNEL_LOOP(index, n) {
    const Dtype* xn = x + index / col_dim * image_dim;
    const long long idx = index % col_dim;
    const int ow = static_cast<int>(idx % out_w);
    const int oh = static_cast<int>((idx / out_w) % out_h);
    const long long row = idx / (static_cast<long long>(out_w) * out_h);  // (c*kh + i)*kw + j
    const long long at = im2col_source(g, row, oh, ow);
    col[index] = at >= 0 ? xn[at] : Dtype(0);
  }
}

// The adjoint: each pixel (of all images: `n` counts them) sums the column entries that read it, in
// kernel-offset order.
template <typename Dtype>
__global__ void col2im_kernel(long long n, const Dtype* col, ConvGeometry g, int out_h, int out_w, Dtype* x) {
  const long long image_dim = static_cast<long long>(g.channels) * g.height * g.width;
  const long long col_dim = static_cast<long long>(g.channels) * g.kernel_h * g.kernel_w * out_h * out_w;
  STRATA_KERNEL_LOOP(index, n) {
    const Dtype* coln = col + index / image_dim * col_dim;
    const long long idx = index % image_dim;
    const int w = static_cast<int>(idx % g.width);
    const int h = static_cast<int>((idx / g.width) % g.height);
    const int c = static_cast<int>(idx / (static_cast<long long>(g.width) * g.height));
    const long long plane = static_cast<long long>(out_h) * out_w;
    Dtype sum = 0;
    for (int i = 0; i < g.kernel_h; ++i) {
      const int th = h + g.pad_h - i * g.dilation_h;  // = oh * stride_h for the window that reads (h, w) at i
      if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= out_h) continue;
      const int oh = th / g.stride_h;
      for (int j = 0; j < g.kernel_w; ++j) {
        const int tw = w + g.pad_w - j * g.dilation_w;
        if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= out_w) continue;
        const long long row = (static_cast<long long>(c) * g.kernel_h + i) * g.kernel_w + j;
        sum += coln[row * plane + static_cast<long long>(oh) * out_w + tw / g.stride_w];
      }
    }
    x[index] = sum;
  }
}

}  // namespace

template <typename Dtype>
void Im2colLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (n == 0) return;
  im2col_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->gpu_data(), geom_, geom_.out_h(), geom_.out_w(),
                                                     top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void Im2colLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  col2im_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, top[0]->gpu_diff(), geom_, geom_.out_h(), geom_.out_w(),
                                                     bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(Im2colLayer);

}  // namespace strata
