// The ReLU on the device, shared by ReLULayer's kernels and those of the layers that absorb a ReLU
// (Layer::Absorb: BatchNorm, Eltwise, Convolution). Private to src/strata/layers. The CPU's forms exactly: NaN
// passes forward and gets gradient 0 backward.
#pragma once

#include "strata/cuda.hpp"

namespace strata {

template <typename Dtype>
__device__ __forceinline__ Dtype relu_value(Dtype v, Dtype slope) {
  return slope == Dtype(0) ? (v < Dtype(0) ? Dtype(0) : v) : (v > Dtype(0) ? v : slope * v);
}

// The gradient's factor, from the sign of the input or (slope >= 0) of the output.
template <typename Dtype>
__device__ __forceinline__ Dtype relu_gradient_factor(Dtype s, Dtype slope) {
  return Dtype(s > Dtype(0)) + slope * Dtype(s <= Dtype(0));
}

// y = ReLU(y) over n values.
template <typename Dtype>
__global__ void relu_in_place(long long n, Dtype slope, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = relu_value(y[i], slope);
}

}  // namespace strata
