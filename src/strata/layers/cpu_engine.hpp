// Which CPU engine a layer with an `engine` field runs (docs/onednn.md). Private to src/strata/layers.
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include "strata/common.hpp"
#include "strata/onednn.hpp"

namespace strata {

// Whether a layer of `type` computes on the CPU through oneDNN: always for `engine: ONEDNN` (in float: oneDNN has
// no double kernels, so asking for it in double is an error), for DEFAULT in float where onednn_by_default(type)
// says so or where the layer needs oneDNN for what it was asked (`needs_onednn`: bfloat16, which only oneDNN
// computes), never for CAFFE (the reference path) or CUDNN (a GPU engine: the CAFFE path on the CPU).
template <typename Dtype>
bool UseOneDnn(bool engine_onednn, bool engine_default, const char* type, const std::string& layer_name,
               bool needs_onednn = false) {
  constexpr bool is_float = std::is_same<Dtype, float>::value;
  STRATA_REQUIRE(!engine_onednn || is_float)
      << type << " layer '" << layer_name << "': engine ONEDNN computes in float only; this net is double";
  return is_float && (engine_onednn || (engine_default && (needs_onednn || onednn_by_default(type))));
}

// The oneDNN engine of a layer of `type` whose parameters `p` have an `engine` field (with Caffe's DEFAULT and
// Strata's ONEDNN): a new Engine where UseOneDnn says oneDNN computes, null where Strata's own path does.
template <typename Engine, typename Dtype, typename Param>
std::shared_ptr<Engine> MakeOneDnnEngine(const Param& p, const char* type, const std::string& layer_name,
                                         bool needs_onednn = false) {
  if (!UseOneDnn<Dtype>(p.engine() == Param::ONEDNN, p.engine() == Param::DEFAULT, type, layer_name, needs_onednn)) {
    return nullptr;
  }
  return std::make_shared<Engine>();
}

}  // namespace strata
