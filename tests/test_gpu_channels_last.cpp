// Channels-last float activations on the GPU (--gpu_channels_last=all; docs/gpu.md, "Channels-last"): a blob's
// device memory held in float with the channels innermost (kNhwc) and converted back for plain readers; each layer
// with channels-last GPU code handed its bottoms and top gradients in that format, against the CPU's layer (both in
// float: the bounds are float's, 1e-5, and 1e-4 for cuDNN's convolutions); the residual net's SGD steps channels-last
// against channels-first on the GPU. TF32 stays off. Without a GPU each test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_channels_last_cases.hpp"
#include "gpu_layer_compare.hpp"
#include "gpu_residual_net.hpp"
#include "strata/net.hpp"

namespace strata {
namespace {

using gpu_compare::ChannelsLastOption;
using gpu_compare::CompareLayers;
using gpu_compare::LayerCase;
using gpu_compare::NormalisedError;

constexpr double kFloatBound = 1e-5;

class GpuTestChannelsLast : public gpu_compare::GpuTest {};

// The layer in float on the GPU, handed channels-last (`top_last`: it keeps that order), against the CPU's.
void CompareChannelsLastWithCpu(LayerCase c, bool top_last = true) {
  const ChannelsLastOption all(GpuOptions::ChannelsLast::kAll);
  c.channels_last = true;
  c.top_channels_last = top_last;
  LayerParameter param;
  ReadProtoFromTextString(c.prototxt, &param);
  CompareLayers(c, param, false, param, true);
}

// Made from float on the device and read back on the host (reordered there) and on the device; converted to and
// from bfloat16 channels-last in place (the order kept, the values rounded); relabelled where both orders are the
// same bytes; a blob of another shape sharing the memory reads it as float in no order of its own.
TEST_F(GpuTestChannelsLast, ABlobConvertsToFloatChannelsLastAndBack) {
  Strata::set_mode(Strata::GPU);
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{{2, 37, 5, 13}, {3, 64, 1, 1}, {2, 1, 9, 7}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    Blob<float> b(shape);
    b.set_memory_category(MemoryCategory::kActivation);
    std::mt19937 gen(5);
    std::uniform_real_distribution<float> u(-10, 10);
    std::vector<float> values(b.count()), rounded(b.count());
    float* h = b.mutable_cpu_data();
    for (int i = 0; i < b.count(); ++i) {
      values[i] = h[i] = u(gen);
      rounded[i] = from_bf16(to_bf16(values[i]));
    }
    b.gpu_data_in(DeviceFormat::kNhwc);
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kNhwc);
    EXPECT_EQ(b.data()->device_bytes(), b.count() * sizeof(float));
    b.mutable_gpu_data_in(DeviceFormat::kNhwc);  // the device's copy the only one
    const float* got = b.cpu_data();             // reordered on the host
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], values[i]) << i;
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kNhwc) << "a host read leaves the device copy";
    // Back to the plain order on the device, then read on the host: the device's transpose alone.
    const bool same_bytes = shape[1] == 1 || shape[2] * shape[3] == 1;
    const void* nhwc = b.gpu_data_in(DeviceFormat::kNhwc);
    const void* plain = b.mutable_gpu_data();
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kPlain);
    EXPECT_EQ(plain == nhwc, same_bytes) << "relabelled rather than transposed";
    got = b.cpu_data();
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], values[i]) << i;
    // To bfloat16 in the same order (one rounding per value) and back to float channels-last.
    b.gpu_data_in(DeviceFormat::kNhwc);
    b.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
    EXPECT_EQ(b.data()->device_bytes(), b.count() * sizeof(bfloat16));
    b.mutable_gpu_data_in(DeviceFormat::kNhwc);
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kNhwc);
    got = b.cpu_data();
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
  }
  // A writer of every value gets channels-last memory directly; a sharing blob of another shape reads plain floats.
  Blob<float> r({2, 6, 4, 4});
  r.set_memory_category(MemoryCategory::kActivation);
  float* rh = r.mutable_gpu_data_in(DeviceFormat::kNhwc, /*keep_values=*/false);
  EXPECT_EQ(r.data_device_format(), DeviceFormat::kNhwc);
  EXPECT_NE(rh, nullptr);
  float* host = r.mutable_cpu_data();
  for (int i = 0; i < r.count(); ++i) host[i] = static_cast<float>(i);
  r.gpu_data_in(DeviceFormat::kNhwc);
  Blob<float> flat({2, 96});
  flat.ShareData(r);
  EXPECT_EQ(flat.data_device_format(), DeviceFormat::kPlain);
  flat.mutable_gpu_data();  // converts with the shape the memory was made for
  EXPECT_EQ(r.data_device_format(), DeviceFormat::kPlain);
  const float* fh = flat.cpu_data();
  for (int i = 0; i < flat.count(); ++i) ASSERT_EQ(fh[i], static_cast<float>(i)) << i;
}

// Convolutions asked for channels-last compute in it (their output left so) where cuDNN has the algorithms: the KRSC
// weights' copy, the weight gradient's reorder into KCRS and the channels-innermost bias run. One input channel and
// groups may compute channels-first, which cuDNN decides.
TEST_F(GpuTestChannelsLast, ConvolutionsMatchTheCpu) {
  const std::string conv = R"(name: "conv" type: "Convolution" convolution_param { weight_filler { type: "gaussian"
      std: 0.3 } bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";
  CompareChannelsLastWithCpu({conv + "num_output: 20 kernel_size: 5 }", {{4, 1, 28, 28}}, 1, -1, 0, false,
                              kFloatBound}, /*top_last=*/false);
  CompareChannelsLastWithCpu({conv + "num_output: 16 kernel_size: 3 stride: 2 pad: 1 }", {{2, 8, 13, 11}}, 1, -1, 0,
                              false, kFloatBound});
  CompareChannelsLastWithCpu({conv + "num_output: 32 kernel_size: 3 pad: 1 group: 4 }", {{2, 16, 9, 9}}, 1, -1, 0,
                              false, kFloatBound}, /*top_last=*/false);
  CompareChannelsLastWithCpu({conv + "num_output: 24 kernel_size: 1 bias_term: false }", {{3, 32, 7, 7}}, 1, -1, 0,
                              false, kFloatBound});
  CompareChannelsLastWithCpu({conv + "num_output: 64 kernel_size: 3 pad: 1 }", {{2, 64, 14, 14}}, 1, -1, 0, false,
                              kFloatBound});
  const std::string deconv = R"(name: "deconv" type: "Deconvolution" convolution_param { weight_filler {
      type: "gaussian" std: 0.3 } bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";
  CompareChannelsLastWithCpu({deconv + "num_output: 16 kernel_size: 4 stride: 2 pad: 1 }", {{2, 8, 7, 6}}, 1, -1, 0,
                              false, kFloatBound});
}

// Every layer that follows its bottom's order keeps float channels-last through forward and backward (each bottom's
// gradient comes back so), Eltwise's product and maximum too (in bfloat16 nets they compute in float); those that
// read channels-first (InnerProduct, Dropout, a Concat along a spatial axis) convert.
TEST_F(GpuTestChannelsLast, LayersAfterAConvolutionKeepItAndMatchTheCpu) {
  std::vector<gpu_compare::OrderCase> cases = gpu_compare::FollowerCases(kFloatBound);
  cases.push_back({{R"(name: "prod" type: "Eltwise" eltwise_param { operation: PROD })",
                    {{2, 4, 6, 5}, {2, 4, 6, 5}, {2, 4, 6, 5}}, 1, -1, 0, false, kFloatBound}});
  cases.push_back({{R"(name: "max" type: "Eltwise" eltwise_param { operation: MAX })", {{2, 4, 6, 5}, {2, 4, 6, 5}},
                    1, -1, 0, false, kFloatBound}});
  for (const gpu_compare::OrderCase& c : cases) CompareChannelsLastWithCpu(c.layer, c.top_last);
}

// The residual net's SGD steps with every convolution channels-last against every activation channels-first, both
// in float on the GPU: the same arithmetic, cuDNN's algorithms summing in other orders.
TEST_F(GpuTestChannelsLast, NetStepsFollowTheChannelsFirstSteps) {
  Strata::set_mode(Strata::GPU);
  NetParameter param;
  ReadProtoFromTextString(gpu_compare::kResidualNet, &param);
  param.mutable_state()->set_phase(TRAIN);
  Net<float> reference(param);
  Net<float> net(param);
  gpu_compare::CopyWeights(reference, &net);
  const gpu_compare::ResidualBatch batch;
  for (int step = 0; step < 5; ++step) {
    float losses[2];
    Net<float>* nets[2] = {&reference, &net};
    for (int k = 0; k < 2; ++k) {
      const ChannelsLastOption order(k == 0 ? GpuOptions::ChannelsLast::kNone : GpuOptions::ChannelsLast::kAll);
      losses[k] = gpu_compare::ResidualNetStep(*nets[k], batch);
    }
    ASSERT_TRUE(std::isfinite(losses[1]));
    EXPECT_NEAR(losses[1], losses[0], 1e-4 * std::fabs(losses[0])) << "step " << step;
    // From the first convolution to the first InnerProduct, channels-last (through the residual block and its
    // Split); InnerProduct reads channels-first, so pool2 was converted for it; the weights are plain.
    for (const char* name : {"pool1", "conv_a", "res", "conv2"}) {
      EXPECT_EQ(net.blob_by_name(name)->data_device_format(), DeviceFormat::kNhwc) << name;
      EXPECT_EQ(net.blob_by_name(name)->diff_device_format(), DeviceFormat::kNhwc) << name;
      EXPECT_EQ(reference.blob_by_name(name)->data_device_format(), DeviceFormat::kPlain) << name;
    }
    EXPECT_EQ(net.blob_by_name("pool2")->data_device_format(), DeviceFormat::kPlain);
    for (Blob<float>* p : net.learnable_params()) EXPECT_EQ(p->data()->device_format(), DeviceFormat::kPlain);
  }
  for (size_t i = 0; i < net.learnable_params().size(); ++i) {
    const Blob<float>& got = *net.learnable_params()[i];
    const Blob<float>& want = *reference.learnable_params()[i];
    EXPECT_LT(NormalisedError(got.cpu_data(), want.cpu_data(), got.count()), 1e-4) << "parameter " << i;
  }
}

}  // namespace
}  // namespace strata
