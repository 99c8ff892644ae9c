// The layer cases the GPU's channels-last tests share (tests/test_gpu_bf16.cpp in bfloat16,
// tests/test_gpu_channels_last.cpp in float): each layer that follows its bottom's order, handed channels-last, and
// those that read channels-first and convert (top_last false).
#pragma once

#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"

namespace strata {
namespace gpu_compare {

// BatchNorm: batch statistics; global ones, distinct per channel (with the zeros a layer starts with, every channel
// would be scaled alike and a wrong channel index could not show); more channels than one block of columns (32) and
// rows split several ways, for the per-channel sums' partials.
inline std::vector<LayerCase> BatchNormCases(double bound) {
  LayerCase global{R"(name: "bn" type: "BatchNorm" batch_norm_param { use_global_stats: true })",
                   {{4, 6, 5, 5}}, 1, -1, 0, false, bound};
  global.fill_params = [](std::vector<std::vector<float>>* p) {
    for (size_t i = 0; i < (*p)[0].size(); ++i) {
      (*p)[0][i] = 0.4f * static_cast<float>(i) - 1.f;
      (*p)[1][i] = 0.5f + 0.3f * static_cast<float>(i);
    }
    (*p)[2][0] = 2.f;
  };
  const std::string bn = R"(name: "bn" type: "BatchNorm")";
  return {{bn, {{4, 6, 5, 5}}, 1, -1, 0, false, bound},
          global,
          {bn, {{8, 40, 9, 9}}, 1, -1, 0, false, bound},
          {bn, {{16, 70, 8, 8}}, 1, -1, 0, false, bound}};
}

struct OrderCase {
  LayerCase layer;
  bool top_last = true;  // the layer keeps channels-last (else it reads channels-first, converting)
};

// `bound` for what the layer computes; MAX pooling without overlapping windows and the copies are exact (1e-7). Also
// backward in forward's order with the value between them dropped (blob lifetimes free a value that no backward
// reads after its last reader: BatchNorm, a sum and a Concat do not read their top), and a sum and a Concat handed
// bottoms in both orders (a convolution before one of them computed channels-first, where cuDNN had no
// channels-last algorithm): they convert the others to bottom 0's.
inline std::vector<OrderCase> FollowerCases(double bound) {
  constexpr double kExact = 1e-7;
  std::vector<OrderCase> cases = {
      {{R"(name: "relu" type: "ReLU")", {{2, 6, 5, 7}}, 1, -1, 0, /*in_place=*/true, bound}},
      {{R"(name: "leaky" type: "ReLU" relu_param { negative_slope: 0.1 })", {{2, 6, 5, 7}}, 1, -1, 0, false, bound}},
      {{R"(name: "max" type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 })", {{2, 5, 12, 10}}, 1,
        -1, 0, false, kExact}},
      // With the mask as a second top, which stays plain.
      {{R"(name: "max" type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 })",
        {{2, 5, 11, 10}}, 2, -1, 0, false, bound}},
      {{R"(name: "ave" type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 })", {{2, 5, 11, 10}}, 1,
        -1, 0, false, bound}},
      {{R"(name: "global" type: "Pooling" pooling_param { pool: AVE global_pooling: true })", {{3, 17, 7, 7}}, 1, -1,
        0, false, bound}},
      {{R"(name: "sum" type: "Eltwise" eltwise_param { operation: SUM coeff: 1 coeff: -0.5 })",
        {{2, 4, 6, 5}, {2, 4, 6, 5}}, 1, -1, 0, false, bound}},
      {{R"(name: "sum3" type: "Eltwise")", {{2, 4, 6, 5}, {2, 4, 6, 5}, {2, 4, 6, 5}}, 1, -1, 0, false, bound}},
      {{R"(name: "lrn" type: "LRN" lrn_param { local_size: 5 alpha: 0.1 beta: 0.75 })", {{2, 7, 5, 4}}, 1, -1, 0,
        false, bound}},
      {{R"(name: "lrn" type: "LRN" lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL })", {{2, 3, 6, 5}}, 1, -1,
        0, false, bound}},
      {{R"(name: "concat" type: "Concat")", {{2, 3, 4, 5}, {2, 5, 4, 5}}, 1, -1, 0, false, kExact}},
      {{R"(name: "concat" type: "Concat" concat_param { axis: 0 })", {{2, 3, 4, 5}, {1, 3, 4, 5}}, 1, -1, 0, false,
        kExact}},
      {{R"(name: "concat" type: "Concat" concat_param { axis: 2 })", {{2, 3, 4, 5}, {2, 3, 2, 5}}, 1, -1, 0, false,
        kExact}, false},
      {{R"(name: "drop" type: "Dropout" dropout_param { dropout_ratio: 0.3 })", {{3, 7, 5, 4}}, 1, -1, 0, false,
        bound}, false},
      {{R"(name: "ip" type: "InnerProduct" inner_product_param { num_output: 10 weight_filler { type: "gaussian"
            std: 0.2 } })", {{8, 50, 4, 4}}, 1, -1, 0, false, bound}, false},
  };
  for (const LayerCase& c : BatchNormCases(bound)) cases.push_back({c});
  for (const char* layer : {R"(name: "bn" type: "BatchNorm")", R"(name: "sum" type: "Eltwise")",
                            R"(name: "concat" type: "Concat")"}) {
    LayerCase dropped{layer, {{2, 8, 5, 6}, {2, 8, 5, 6}}, 1, -1, 0, false, bound};
    if (std::string(layer).find("BatchNorm") != std::string::npos) dropped.bottoms.pop_back();
    dropped.release_top = true;
    cases.push_back({dropped});
  }
  for (const char* layer : {R"(name: "sum" type: "Eltwise")", R"(name: "concat" type: "Concat")",
                            R"(name: "concat" type: "Concat" concat_param { axis: 0 })"}) {
    for (bool first_last : {true, false}) {
      LayerCase mixed{layer, {{2, 8, 5, 6}, {2, 8, 5, 6}}, 1, -1, 0, false, bound};
      mixed.bottoms_channels_last = {first_last, !first_last};
      cases.push_back({mixed, first_last});
    }
  }
  return cases;
}

}  // namespace gpu_compare
}  // namespace strata
