// Where each element of a Crop layer's top lies in its bottom, for the CPU and the GPU code alike.
#pragma once

#include <vector>

#include "strata/blob.hpp"
#include "strata/common.hpp"  // STRATA_HOST_DEVICE

namespace strata {

// The top is a window of the bottom: top element (t_0, ..., t_k) is bottom element (t_0 + o_0, ..., t_k + o_k).
// Passed to kernels by value.
struct CropMap {
  int axes = 0;
  int top_shape[kMaxBlobAxes];
  long long bottom_stride[kMaxBlobAxes];
  long long base = 0;  // the bottom offset of top element 0

  CropMap(const std::vector<int>& bottom_shape, const std::vector<int>& top_shape_in, const std::vector<int>& offsets) {
    axes = static_cast<int>(top_shape_in.size());
    long long stride = 1;
    for (int k = axes - 1; k >= 0; --k) {
      top_shape[k] = top_shape_in[k];
      bottom_stride[k] = stride;
      base += offsets[k] * stride;
      stride *= bottom_shape[k];
    }
  }

  // The bottom offset of the top element at flat index i.
  STRATA_HOST_DEVICE long long bottom_index(long long i) const {
    long long b = base;
    for (int k = axes - 1; k >= 0; --k) {
      b += (i % top_shape[k]) * bottom_stride[k];
      i /= top_shape[k];
    }
    return b;
  }
};

}  // namespace strata

