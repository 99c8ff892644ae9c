// The vision layers (Deconvolution, Crop, Im2col, SPP, Embed) on the GPU against their CPU versions, and GPU
// gradient checks in double. They skip without a GPU (gpu_layer_compare.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"

namespace strata {
namespace {

using gpu_compare::CompareWithCpu;
using gpu_compare::GpuTest;
using gpu_compare::LayerCase;

std::vector<LayerCase> VisionCases() {
  return {
      {R"(name: "crop" type: "Crop" crop_param { offset: 1 })", {{2, 3, 7, 6}, {2, 3, 4, 3}}},
      {R"(name: "crop_per_axis" type: "Crop" crop_param { axis: 1 offset: 1 offset: 2 offset: 0 })",
       {{2, 4, 7, 6}, {1, 2, 5, 6}}},
      {R"(name: "im2col" type: "Im2col" convolution_param { kernel_size: 3 pad: 1 stride: 2 })", {{2, 3, 7, 6}}},
      {R"(name: "im2col_dilated" type: "Im2col" convolution_param { kernel_h: 2 kernel_w: 3 dilation: 2
          pad_h: 1 pad_w: 0 })",
       {{2, 2, 6, 7}}},
      {R"(name: "spp_max" type: "SPP" spp_param { pyramid_height: 3 pool: MAX })", {{2, 3, 9, 8}}},
      {R"(name: "spp_ave" type: "SPP" spp_param { pyramid_height: 2 pool: AVE })", {{2, 3, 7, 5}}},
      {R"(name: "spp_one_level" type: "SPP" spp_param { pyramid_height: 1 pool: MAX })", {{2, 3, 6, 5}}},
      {R"(name: "embed" type: "Embed" embed_param { num_output: 6 input_dim: 5
          weight_filler { type: "uniform" min: -1 max: 1 } bias_filler { type: "uniform" min: -1 max: 1 } })",
       {{4, 7}}, 1, 0, 5},
      {R"(name: "embed_nobias" type: "Embed" embed_param { num_output: 3 input_dim: 4 bias_term: false
          weight_filler { type: "uniform" min: -1 max: 1 } })",
       {{10}}, 1, 0, 4},
  };
}

TEST_F(GpuTest, VisionLayersMatchCpu) {
  for (const auto& c : VisionCases()) CompareWithCpu(c);
}

// Finite differences of the GPU forward against the GPU backward, in double.
TEST_F(GpuTest, VisionGradientChecks) {
  // Crop: only bottom 0 carries a gradient.
  gpu_compare::GpuGradientCheck({R"(name: "crop" type: "Crop" crop_param { axis: 1 offset: 1 })",
                                 {{2, 3, 5, 4}, {2, 2, 3, 2}}, 0});
  gpu_compare::GpuGradientCheck(
      {R"(name: "im2col" type: "Im2col" convolution_param { kernel_size: 3 pad: 1 stride: 2 dilation: 1 })",
       {{2, 2, 5, 6}}});
  gpu_compare::GpuGradientCheck({R"(name: "spp_max" type: "SPP" spp_param { pyramid_height: 3 pool: MAX })",
                                 {{2, 2, 9, 8}}});
  gpu_compare::GpuGradientCheck({R"(name: "spp_ave" type: "SPP" spp_param { pyramid_height: 3 pool: AVE })",
                                 {{2, 2, 9, 8}}});
  // Embed: the weights and bias only (bottom 1 does not exist, so no bottom is checked); integer indices.
  gpu_compare::GradientCase embed{R"(name: "embed" type: "Embed" embed_param { num_output: 3 input_dim: 5
      weight_filler { type: "uniform" min: -1 max: 1 } bias_filler { type: "uniform" min: -1 max: 1 } })",
                                  {{3, 4}}, 1};
  embed.fill = [](const std::vector<Blob<double>*>& b) {
    for (int i = 0; i < b[0]->count(); ++i) b[0]->mutable_cpu_data()[i] = (i * 7) % 5;
  };
  gpu_compare::GpuGradientCheck(embed);
}

// An index out of range is refused on the GPU too, naming the first bad position.
TEST_F(GpuTest, EmbedRefusesBadIndexOnGpu) {
  Strata::set_mode(Strata::GPU);
  LayerParameter p;
  ReadProtoFromTextString(R"(name: "embed" type: "Embed" embed_param { num_output: 2 input_dim: 3 })", &p);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  Blob<float> x({4}), y;
  const float values[] = {0, 2, 3, -1};
  std::copy(values, values + 4, x.mutable_cpu_data());
  layer->SetUp({&x}, {&y});
  try {
    layer->Forward({&x}, {&y});
    ADD_FAILURE() << "index 3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  x.mutable_cpu_data()[2] = 1;
  x.mutable_cpu_data()[3] = 2;
  EXPECT_NO_THROW(layer->Forward({&x}, {&y}));
  Strata::set_mode(Strata::CPU);
}

// With gpu_options().deterministic, Embed's weight gradient adds the lookups in the CPU's order: the same bits.
TEST_F(GpuTest, EmbedDeterministicGradientIsTheCpus) {
  LayerParameter p;
  ReadProtoFromTextString(R"(name: "embed" type: "Embed" embed_param { num_output: 37 input_dim: 6
      weight_filler { type: "uniform" min: -1 max: 1 } bias_filler { type: "uniform" min: -1 max: 1 } })", &p);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  Blob<float> x({50, 3}), y;
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = static_cast<float>((i * 5) % 6);  // repeats
  layer->SetUp({&x}, {&y});
  std::vector<float> dy(y.count());
  rng_uniform<float>(y.count(), -1.f, 1.f, dy.data());
  auto weight_gradient = [&](Strata::Mode mode) {
    Strata::set_mode(mode);
    cpu_set(layer->blobs()[0]->count(), 0.f, layer->blobs()[0]->mutable_cpu_diff());
    layer->Forward({&x}, {&y});
    std::copy(dy.begin(), dy.end(), y.mutable_cpu_diff());
    layer->Backward({&y}, {false}, {&x});
    const float* dw = layer->blobs()[0]->cpu_diff();
    return std::vector<float>(dw, dw + layer->blobs()[0]->count());
  };
  const bool saved = gpu_options().deterministic;
  gpu_options().deterministic = true;
  const std::vector<float> cpu = weight_gradient(Strata::CPU), gpu = weight_gradient(Strata::GPU);
  gpu_options().deterministic = saved;
  Strata::set_mode(Strata::CPU);
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_EQ(gpu[i], cpu[i]) << i;
}

}  // namespace
}  // namespace strata
