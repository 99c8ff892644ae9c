// The GPU versions of ArgMax, Silence, Parameter, Tile, Reduction, Filter and MVN against their CPU versions,
// and GPU gradient checks in double (gpu_layer_compare.hpp). They skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"

namespace strata {
namespace {

using gpu_compare::CompareWithCpu;
using gpu_compare::GpuTest;
using gpu_compare::LayerCase;

// ArgMax has no backward, so CompareWithCpu (which runs one) does not apply: forward only, on uniform values
// and on small integers, whose many ties must be broken as on the CPU (the larger index first). The results
// are indices or copied values: they must match exactly.
void CompareArgMaxForward(const std::string& prototxt, const std::vector<int>& shape, bool ties) {
  LayerParameter param;
  ReadProtoFromTextString(prototxt, &param);
  SCOPED_TRACE(prototxt + (ties ? " (ties)" : ""));
  Strata::set_mode(Strata::CPU);
  Strata::set_random_seed(1701);
  Blob<float> x(shape), y;
  float* v = x.mutable_cpu_data();
  rng_uniform<float>(x.count(), -1.f, 1.f, v);
  if (ties) {
    for (int i = 0; i < x.count(); ++i) v[i] = static_cast<float>(static_cast<int>((v[i] + 1) * 2));  // 0..3
  }
  auto layer = LayerRegistry<float>::CreateLayer(param);
  layer->SetUp({&x}, {&y});
  layer->Forward({&x}, {&y});
  const std::vector<float> cpu(y.cpu_data(), y.cpu_data() + y.count());
  Strata::set_mode(Strata::GPU);
  cpu_set(y.count(), -7.f, y.mutable_cpu_data());
  layer->Forward({&x}, {&y});
  Strata::set_mode(Strata::CPU);
  int mismatches = 0;
  for (int i = 0; i < y.count(); ++i) mismatches += y.cpu_data()[i] != cpu[i];
  EXPECT_EQ(mismatches, 0) << "of " << y.count() << " values";
  std::printf("[gpu-vs-cpu] %-18s %-12s forward      n=%-7d mismatches %d%s\n", "ArgMax", param.name().c_str(),
              y.count(), mismatches, ties ? " (ties)" : "");
}

std::vector<LayerCase> ShapeCases() {
  LayerCase filter{R"(name: "filter" type: "Filter")", {{6, 3, 4}, {6, 5}, {6, 1}}, 2};
  filter.label_bottom = 2;  // the selector: 0s and 1s, no gradient
  filter.label_classes = 2;
  LayerCase filter_flat{R"(name: "filter_1d" type: "Filter")", {{40, 70}, {40}}, 1};
  filter_flat.label_bottom = 1;
  filter_flat.label_classes = 2;
  return {
      {R"(name: "silence" type: "Silence")", {{2, 3, 4}, {5}}, 0},
      {R"(name: "param" type: "Parameter" parameter_param { shape { dim: 3 dim: 4 } }
          blobs { shape { dim: 3 dim: 4 } data: 1 data: -2 data: 3 data: 0.5 data: 0 data: 7 data: -1 data: 2
                  data: 4 data: -3 data: 0.25 data: 9 })",
       {}},
      {R"(name: "tile" type: "Tile" tile_param { tiles: 3 })", {{2, 3, 4, 5}}},
      {R"(name: "tile_axis0" type: "Tile" tile_param { axis: 0 tiles: 2 })", {{3, 7}}},
      {R"(name: "tile_last" type: "Tile" tile_param { axis: -1 tiles: 4 })", {{2, 3, 5}}},
      {R"(name: "sum_all" type: "Reduction")", {{4, 50, 30}}},
      {R"(name: "mean_rows" type: "Reduction" reduction_param { operation: MEAN axis: 1 coeff: 0.5 })",
       {{6, 20, 30}}},
      {R"(name: "asum_short" type: "Reduction" reduction_param { operation: ASUM axis: -1 })", {{5, 7, 9}}},
      {R"(name: "sumsq" type: "Reduction" reduction_param { operation: SUMSQ axis: 2 coeff: -2 })",
       {{3, 4, 100}}},
      filter,
      filter_flat,
      {R"(name: "mvn" type: "MVN")", {{2, 3, 9, 8}}},
      {R"(name: "mvn_across" type: "MVN" mvn_param { across_channels: true })", {{3, 4, 5, 6}}},
      {R"(name: "mvn_mean_only" type: "MVN" mvn_param { normalize_variance: false })", {{2, 3, 20, 20}}},
      {R"(name: "mvn_short_rows" type: "MVN" mvn_param { eps: 0.01 })", {{4, 5, 3}}},
      {R"(name: "mvn_in_place" type: "MVN")", {{2, 3, 6, 5}}, 1, -1, 0, true},
  };
}

TEST_F(GpuTest, ShapeLayersMatchCpu) {
  for (const auto& c : ShapeCases()) CompareWithCpu(c);
  struct ArgMaxCase {
    const char* prototxt;
    std::vector<int> shape;
  };
  const ArgMaxCase argmax[] = {
      {R"(name: "items" type: "ArgMax")", {6, 10}},                                           // few searches
      {R"(name: "items_top3" type: "ArgMax" argmax_param { top_k: 3 out_max_val: true })", {4, 3, 5, 7}},
      {R"(name: "long_rows" type: "ArgMax" argmax_param { top_k: 2 })", {3, 5000}},  // one block per search
      {R"(name: "channels" type: "ArgMax" argmax_param { axis: 1 top_k: 2 })", {4, 6, 30, 20}},  // thread each
      {R"(name: "channel_vals" type: "ArgMax" argmax_param { axis: 1 out_max_val: true })", {2, 5, 40, 30}},
      {R"(name: "last_axis" type: "ArgMax" argmax_param { axis: -1 top_k: 4 })", {50, 40, 8}},
      {R"(name: "many_items" type: "ArgMax" argmax_param { top_k: 2 out_max_val: true })", {2000, 3, 4}},
  };
  for (const auto& c : argmax) {
    for (bool ties : {false, true}) CompareArgMaxForward(c.prototxt, c.shape, ties);
  }
}

// Finite differences of the GPU forward against the GPU backward, in double.
TEST_F(GpuTest, ShapeGradientChecks) {
  const char* cases[] = {
      R"(name: "tile" type: "Tile" tile_param { tiles: 2 })",
      R"(name: "tile_last" type: "Tile" tile_param { axis: -1 tiles: 3 })",
      R"(name: "sum" type: "Reduction" reduction_param { axis: 1 coeff: 0.5 })",
      R"(name: "mean" type: "Reduction" reduction_param { operation: MEAN })",
      R"(name: "sumsq" type: "Reduction" reduction_param { operation: SUMSQ axis: -1 })",
      R"(name: "mvn" type: "MVN")",
      R"(name: "mvn_across" type: "MVN" mvn_param { across_channels: true })",
      R"(name: "mvn_mean_only" type: "MVN" mvn_param { normalize_variance: false })",
  };
  for (const char* text : cases) gpu_compare::GpuGradientCheck({text});
  // |x| away from its kink: values in [0.1, 1] with random signs.
  gpu_compare::GradientCase asum{R"(name: "asum" type: "Reduction" reduction_param { operation: ASUM axis: 2 })"};
  asum.fill = [](const std::vector<Blob<double>*>& b) {
    double* x = b[0]->mutable_cpu_data();
    for (int i = 0; i < b[0]->count(); ++i) x[i] = (i % 3 == 0 ? -1 : 1) * (0.1 + 0.9 * std::fabs(x[i]));
  };
  gpu_compare::GpuGradientCheck(asum);
  // Filter: the data bottoms, the selector fixed (it takes no gradient).
  for (int checked : {0, 1}) {
    gpu_compare::GradientCase filter{R"(name: "filter" type: "Filter")", {{5, 3, 2}, {5, 4}, {5}}, checked};
    filter.tops = 2;
    filter.fill = [](const std::vector<Blob<double>*>& b) {
      const double selector[] = {1, 0, 1, 1, 0};
      std::copy(selector, selector + 5, b[2]->mutable_cpu_data());
    };
    gpu_compare::GpuGradientCheck(filter);
  }
  // Parameter: its blob's gradient, no bottoms.
  gpu_compare::GradientCase param{R"(name: "param" type: "Parameter" parameter_param { shape { dim: 3 dim: 4 } }
                                     blobs { shape { dim: 3 dim: 4 } data: 1 data: -2 data: 3 data: 0.5 data: 0
                                             data: 7 data: -1 data: 2 data: 4 data: -3 data: 0.25 data: 9 })",
                                  {}};
  gpu_compare::GpuGradientCheck(param);
  // Silence: zero gradients to every bottom.
  gpu_compare::GradientCase silence{R"(name: "silence" type: "Silence")", {{2, 3}, {4}}};
  silence.tops = 0;
  gpu_compare::GpuGradientCheck(silence);
}

}  // namespace
}  // namespace strata
