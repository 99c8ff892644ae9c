// Which CPU engine a layer with an `engine` field runs (docs/onednn.md). Private to src/strata/layers.
#pragma once

#include <type_traits>

#include "strata/common.hpp"
#include "strata/onednn.hpp"

namespace strata {

// Whether a layer of `type` computes on the CPU through oneDNN: always for `engine: ONEDNN` (in float: oneDNN has
// no double kernels, so asking for it in double is an error), for DEFAULT in float where onednn_by_default(type)
// says so, never for CAFFE (the reference path) or CUDNN (a GPU engine: the CAFFE path on the CPU).
template <typename Dtype>
bool UseOneDnn(bool engine_onednn, bool engine_default, const char* type, const std::string& layer_name) {
  constexpr bool is_float = std::is_same<Dtype, float>::value;
  STRATA_REQUIRE(!engine_onednn || is_float)
      << type << " layer '" << layer_name << "': engine ONEDNN computes in float only; this net is double";
  return is_float && (engine_onednn || (engine_default && onednn_by_default(type)));
}

}  // namespace strata
