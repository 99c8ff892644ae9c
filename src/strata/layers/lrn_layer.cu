#include "strata/cuda.hpp"
#include "strata/layers/lrn_layer.hpp"

namespace strata {

namespace {

// One thread per value, summing its own window directly (n = 5 channels, or an n x n patch, is a handful of
// reads that neighbouring threads share through the cache); the running sums of the CPU version would serialise
// a thread over a whole channel fibre for no gain here.
//   ACROSS: scale = k + alpha/n * sum of x^2 over channels [c - pre, c + pre] (clipped)
//   WITHIN: scale = 1 + alpha/(n*n) * sum of x^2 over the n x n patch (zero outside the image)
template <typename Dtype>
__global__ void lrn_forward(long long count, const Dtype* x, int C, int H, int W, int size, Dtype alpha,
                            Dtype beta, Dtype k, bool across, Dtype* scale, Dtype* y) {
  const int pre = (size - 1) / 2;
  const long long HW = static_cast<long long>(H) * W;
  STRATA_KERNEL_LOOP(i, count) {
    Dtype s = 0;
    if (across) {
      const int c = (i / HW) % C;
      const Dtype* base = x + i - c * HW;
      for (int j = max(c - pre, 0); j <= min(c + pre, C - 1); ++j) s += base[j * HW] * base[j * HW];
      s = k + alpha / size * s;
    } else {
      const int w = i % W, h = (i / W) % H;
      const Dtype* plane = x + i - (static_cast<long long>(h) * W + w);
      for (int a = max(h - pre, 0); a <= min(h + pre, H - 1); ++a)
        for (int b = max(w - pre, 0); b <= min(w + pre, W - 1); ++b) s += plane[a * W + b] * plane[a * W + b];
      s = Dtype(1) + alpha * (s / Dtype(size * size));
    }
    scale[i] = s;
    y[i] = x[i] * pow(s, -beta);
  }
}

// dx = dy * scale^-beta - coef * x * (window sum of dy * y / scale); the window is the same as forward's.
template <typename Dtype>
__global__ void lrn_backward(long long count, const Dtype* x, const Dtype* y, const Dtype* dy, const Dtype* scale,
                             int C, int H, int W, int size, Dtype coef, Dtype beta, bool across, Dtype* dx) {
  const int pre = (size - 1) / 2;
  const long long HW = static_cast<long long>(H) * W;
  STRATA_KERNEL_LOOP(i, count) {
    Dtype r = 0;
    if (across) {
      const int c = (i / HW) % C;
      const long long o = i - c * HW;
      for (int j = max(c - pre, 0); j <= min(c + pre, C - 1); ++j) {
        const long long q = o + j * HW;
        r += dy[q] * y[q] / scale[q];
      }
    } else {
      const int w = i % W, h = (i / W) % H;
      const long long o = i - (static_cast<long long>(h) * W + w);
      for (int a = max(h - pre, 0); a <= min(h + pre, H - 1); ++a) {
        for (int b = max(w - pre, 0); b <= min(w + pre, W - 1); ++b) {
          const long long q = o + a * W + b;
          r += dy[q] * y[q] / scale[q];
        }
      }
    }
    dx[i] = dy[i] * pow(scale[i], -beta) - coef * x[i] * r;
  }
}

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  lrn_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->gpu_data(), channels_, height_, width_, size_,
                                                   alpha_, beta_, k_, across_, scale_.mutable_gpu_data(),
                                                   top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void LRNLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const Dtype coef = Dtype(2) * alpha_ * beta_ / (across_ ? Dtype(size_) : Dtype(size_ * size_));
  lrn_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->gpu_data(), top[0]->gpu_data(), top[0]->gpu_diff(),
                                                    scale_.gpu_data(), channels_, height_, width_, size_, coef, beta_,
                                                    across_, bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(LRNLayer);

}  // namespace strata
