// The Embed layer's test of an index, for its CPU and GPU code alike.
#pragma once

#include "strata/common.hpp"  // STRATA_HOST_DEVICE

namespace strata {

// Whether v is an integer in [0, input_dim) (the range is tested first, so the conversion is defined; NaN fails).
template <typename Dtype>
STRATA_HOST_DEVICE inline bool IsEmbedIndex(Dtype v, int input_dim) {
  return v >= Dtype(0) && v < Dtype(input_dim) && v == static_cast<Dtype>(static_cast<int>(v));
}

}  // namespace strata

