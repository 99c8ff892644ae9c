// MAX and AVE pooling of one output, and the gradient of one input, with the activations in either order
// (channels-first, or channels-last: docs/gpu.md, "Channels-last"), shared by the GPU's kernels (one thread per
// element) and the host tests that hold them to the CPU's pooling. Private to src/strata/layers.
//
// MAX scans its window in row-major order with a strict >, so of equal maxima the first (smallest index) wins, as
// on the CPU; an empty window gives -FLT_MAX and index -1. AVE divides by Caffe's window size: the window clipped to
// the padded image, never below 1. The argmax is h * W + w in either order; the mask top is always channels-first.
#pragma once

#include <cfloat>

#include "strata/common.hpp"
#include "strata/memory_format.hpp"

namespace strata {
namespace pool_order {

STRATA_HOST_DEVICE inline int smaller(int a, int b) { return a < b ? a : b; }
STRATA_HOST_DEVICE inline int larger(int a, int b) { return a > b ? a : b; }

// Where an element of an image blob is: channel c of position `pixel` (h * W + w) of `image`; with channels-first
// `image` counts planes (n * C + c) and c is 0.
struct Place {
  long long image, c, pixel;
};
STRATA_HOST_DEVICE inline Place place_of(long long k, long long positions, int C, bool last) {
  const long long c = last ? k % C : 0, rest = last ? k / C : k;
  return {rest / positions, c, rest % positions};
}
// The first element of that plane, and the distance between its positions.
STRATA_HOST_DEVICE inline long long plane_start(const Place& p, long long positions, int C, bool last) {
  return last ? p.image * positions * C + p.c : p.image * positions;
}

// Output k: y[k], and for MAX its argmax in mask[k] and (as Dtype, at its channels-first index) in mask_top.
template <typename T, typename Dtype, typename Window>
STRATA_HOST_DEVICE inline void Forward(long long k, const T* x, const Window& w, int C, bool last, bool max_pool, T* y,
                                       int* mask, Dtype* mask_top) {
  using Compute = decltype(value_of(T{}));
  const long long outputs = static_cast<long long>(w.pooled_h) * w.pooled_w;
  const Place p = place_of(k, outputs, C, last);
  const int ph = static_cast<int>(p.pixel / w.pooled_w), pw = static_cast<int>(p.pixel % w.pooled_w);
  const long long positions = static_cast<long long>(w.height) * w.width;
  const T* xc = x + plane_start(p, positions, C, last);
  const long long step = last ? C : 1;
  const int hs = ph * w.stride_h - w.pad_h, ws = pw * w.stride_w - w.pad_w;
  const int h0 = larger(hs, 0), w0 = larger(ws, 0);
  const int h1 = smaller(hs + w.kernel_h, w.height), w1 = smaller(ws + w.kernel_w, w.width);
  if (max_pool) {
    Compute best = -FLT_MAX;
    int arg = -1;
    for (int h = h0; h < h1; ++h) {
      for (int x_w = w0; x_w < w1; ++x_w) {
        const Compute v = value_of(xc[(h * w.width + x_w) * step]);
        if (v > best) {
          best = v;
          arg = h * w.width + x_w;
        }
      }
    }
    put(&y[k], best);
    mask[k] = arg;
    if (mask_top) mask_top[last ? (p.image * C + p.c) * outputs + p.pixel : k] = Dtype(arg);
    return;
  }
  Compute sum = 0;
  for (int h = h0; h < h1; ++h)
    for (int x_w = w0; x_w < w1; ++x_w) sum += value_of(xc[(h * w.width + x_w) * step]);
  const int rows = smaller(hs + w.kernel_h, w.height + w.pad_h) - hs;
  const int cols = smaller(ws + w.kernel_w, w.width + w.pad_w) - ws;
  put(&y[k], sum / Compute(larger(rows * cols, 1)));
}

// Input k's gradient, gathered from the outputs whose windows cover it (no atomics, so deterministic), in the CPU's
// order (output rows, then columns, ascending); MAX routes through the mask forward wrote (or STOCHASTIC's pick).
template <typename T, typename Window>
STRATA_HOST_DEVICE inline void Backward(long long k, const T* dy, const Window& w, int C, bool last, bool max_pool,
                                        const int* mask, T* dx) {
  using Compute = decltype(value_of(T{}));
  const long long positions = static_cast<long long>(w.height) * w.width;
  const Place p = place_of(k, positions, C, last);
  const int ih = static_cast<int>(p.pixel / w.width), iw = static_cast<int>(p.pixel % w.width);
  const int index = ih * w.width + iw;
  // Outputs ph with ph*stride - pad <= ih < ph*stride - pad + kernel.
  const int ph0 = ih + w.pad_h < w.kernel_h ? 0 : (ih + w.pad_h - w.kernel_h) / w.stride_h + 1;
  const int ph1 = smaller((ih + w.pad_h) / w.stride_h + 1, w.pooled_h);
  const int pw0 = iw + w.pad_w < w.kernel_w ? 0 : (iw + w.pad_w - w.kernel_w) / w.stride_w + 1;
  const int pw1 = smaller((iw + w.pad_w) / w.stride_w + 1, w.pooled_w);
  const long long outputs = static_cast<long long>(w.pooled_h) * w.pooled_w;
  const long long out0 = plane_start(p, outputs, C, last);
  const long long step = last ? C : 1;
  Compute g = 0;
  for (int ph = ph0; ph < ph1; ++ph) {
    for (int pw = pw0; pw < pw1; ++pw) {
      const long long o = out0 + (ph * w.pooled_w + pw) * step;
      if (max_pool) {
        if (mask[o] == index) g += value_of(dy[o]);
      } else {
        const int hs = ph * w.stride_h - w.pad_h, ws = pw * w.stride_w - w.pad_w;
        const int rows = smaller(hs + w.kernel_h, w.height + w.pad_h) - hs;
        const int cols = smaller(ws + w.kernel_w, w.width + w.pad_w) - ws;
        g += value_of(dy[o]) / Compute(larger(rows * cols, 1));
      }
    }
  }
  put(&dx[k], g);
}

}  // namespace pool_order
}  // namespace strata
