// LRN of one value and the gradient of one input, with the activations in either order (ImageLayout: channels-first,
// or channels-last: docs/gpu.md, "Channels-last"), shared by the GPU's kernels (one thread per value, summing its
// own window: n = 5 channels, or an n x n patch, is a handful of reads that neighbouring threads share through the
// cache) and the host test that holds them to the CPU's LRN. Private to src/strata/layers.
//   ACROSS: scale = k + alpha/n * sum of x^2 over channels [c - pre, c + pre] (clipped)
//   WITHIN: scale = 1 + alpha/(n*n) * sum of x^2 over the n x n patch (zero outside the image)
// T: how x, y and the gradients are stored (Dtype, or bfloat16 with float arithmetic); scale is Dtype, in the same
// order as x.
#pragma once

#include <cmath>

#include "strata/common.hpp"
#include "strata/memory_format.hpp"

namespace strata {
namespace lrn_window {

struct Window {
  ImageLayout order;  // C, S = height x width, and which order
  int width = 0, size = 0;
  bool across = true;
};

STRATA_HOST_DEVICE inline int clip_low(int a) { return a > 0 ? a : 0; }
STRATA_HOST_DEVICE inline int clip_high(int a, int limit) { return a < limit ? a : limit; }

// Calls f(q) for every value q in value i's window.
template <typename F>
STRATA_HOST_DEVICE inline void for_window(long long i, const Window& w, F f) {
  const int pre = (w.size - 1) / 2;
  const ImageLayout& o = w.order;
  if (w.across) {
    const int c = static_cast<int>(o.channel_of(i));
    const long long first = i - c * o.channel_stride();
    for (int j = clip_low(c - pre); j <= clip_high(c + pre, static_cast<int>(o.C) - 1); ++j) {
      f(first + j * o.channel_stride());
    }
    return;
  }
  const long long p = o.pixel_of(i);
  const int W = w.width, H = static_cast<int>(o.S / W);
  const int x_w = static_cast<int>(p % W), x_h = static_cast<int>(p / W);
  const long long first = i - p * o.pixel_stride();
  for (int a = clip_low(x_h - pre); a <= clip_high(x_h + pre, H - 1); ++a) {
    for (int b = clip_low(x_w - pre); b <= clip_high(x_w + pre, W - 1); ++b) {
      f(first + (static_cast<long long>(a) * W + b) * o.pixel_stride());
    }
  }
}

// Value i's scale and output.
template <typename T, typename Dtype>
STRATA_HOST_DEVICE inline void Forward(long long i, const T* x, const Window& w, Dtype alpha, Dtype beta, Dtype k,
                                       Dtype* scale, T* y) {
  using std::pow;
  Dtype s = 0;
  for_window(i, w, [&](long long q) {
    const Dtype v = value_of(x[q]);
    s += v * v;
  });
  s = w.across ? k + alpha / w.size * s : Dtype(1) + alpha * (s / Dtype(w.size * w.size));
  scale[i] = s;
  put(&y[i], value_of(x[i]) * pow(s, -beta));
}

// dx = dy * scale^-beta - coef * x * (window sum of dy * y / scale); the window is the same as forward's.
template <typename T, typename Dtype>
STRATA_HOST_DEVICE inline void Backward(long long i, const T* x, const T* y, const T* dy, const Dtype* scale,
                                        const Window& w, Dtype coef, Dtype beta, T* dx) {
  using std::pow;
  Dtype r = 0;
  for_window(i, w, [&](long long q) { r += value_of(dy[q]) * value_of(y[q]) / scale[q]; });
  put(&dx[i], value_of(dy[i]) * pow(scale[i], -beta) - coef * value_of(x[i]) * r);
}

}  // namespace lrn_window
}  // namespace strata
