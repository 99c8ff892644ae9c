// STOCHASTIC pooling (Zeiler & Fergus 2013, as Caffe computes it) for one output window, shared by the CPU loop
// and the CUDA kernel so both pick the same element. The inputs are taken as non-negative activations (after a
// ReLU), as in Caffe; the window is [h0, h1) x [w0, w1) of one plane (no padding). Private to src/strata/layers.
#pragma once

#include <cfloat>

#include "strata/common.hpp"

namespace strata {
namespace stochastic_pool {

// TRAIN: an element drawn with probability proportional to its value. With u uniform in [0, 1), the first
// element (row-major) whose running sum reaches u * (window sum); rounding can leave the running sum just short
// of the threshold, and then the last element is taken. Returns its index h * width + w; *value is the element.
template <typename Dtype>
STRATA_HOST_DEVICE inline int Pick(const Dtype* x, int width, int h0, int h1, int w0, int w1, double u, Dtype* value) {
  Dtype sum = 0;
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w) sum += x[h * width + w];
  const Dtype threshold = static_cast<Dtype>(u) * sum;
  Dtype running = 0;
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) {
      running += x[h * width + w];
      if (running >= threshold) {
        *value = x[h * width + w];
        return h * width + w;
      }
    }
  }
  const int last = (h1 - 1) * width + (w1 - 1);
  *value = x[last];
  return last;
}

// TEST: the probability-weighted mean, sum(x^2) / sum(x), with Caffe's FLT_MIN added to the denominator so an
// all-zero window gives 0. *sum gets that denominator (backward needs it).
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype WeightedMean(const Dtype* x, int width, int h0, int h1, int w0, int w1, Dtype* sum) {
  Dtype s = FLT_MIN, q = 0;
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) {
      const Dtype v = x[h * width + w];
      s += v;
      q += v * v;
    }
  }
  *sum = s;
  return q / s;
}

// d WeightedMean / d x_j = (2 x_j - y) / s, with y the output and s the denominator.
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype WeightedMeanGradient(Dtype xj, Dtype y, Dtype s) {
  return (2 * xj - y) / s;
}

}  // namespace stochastic_pool
}  // namespace strata
