// precision: BF16 and FP16 on the GPU (docs/gpu.md, "bfloat16" and "float16"): a blob's device memory held in
// bfloat16 and converted back for plain readers; each layer with 16-bit GPU code, in each 16-bit type
// (GpuTest16Bit), against the CPU's float layer on operands rounded to that type (inputs, parameters, top
// gradients), so that the two differ only by what the GPU rounds when it stores (outputs, input gradients, the
// weight gradient before its float accumulation: a few roundings, bound 1e-2 normalised, which float16's three more
// bits of significand meet with room; MAX pooling and copies exactly); a small net's SGD steps (LeNet's layers and a
// residual block with fused BatchNorm, Scale and ReLU, a sum and a Split) in 16 bits against float on the GPU.
// Finite differences would measure the rounding, not the gradients: the CPU's float gradients on the same rounded
// operands are the check instead. Without a GPU (or on one without the type's arithmetic) each test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_channels_last_cases.hpp"
#include "gpu_layer_compare.hpp"
#include "gpu_residual_net.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"

namespace strata {
namespace {

using gpu_compare::CompareLayers;
using gpu_compare::LayerCase;
using gpu_compare::NormalisedError;

constexpr double kBf16Bound = 1e-2;

class GpuTestBf16 : public gpu_compare::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!gpu_has_bf16()) GTEST_SKIP() << "this GPU has no bfloat16 tensor cores (compute capability below 8.0)";
  }
};

ElementType ElementTypeOf(Precision p) { return p == BF16 ? ElementType::kBf16 : ElementType::kFp16; }

// The layer and net tests, once per 16-bit precision. `tested` is the running test's, for the helpers below.
class GpuTest16Bit : public gpu_compare::GpuTest, public ::testing::WithParamInterface<Precision> {
 public:
  static inline Precision tested = BF16;

 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (GetParam() == BF16 && !gpu_has_bf16()) {
      GTEST_SKIP() << "this GPU has no bfloat16 tensor cores (compute capability below 8.0)";
    }
    if (GetParam() == FP16 && !gpu_has_fp16()) GTEST_SKIP() << "this GPU has no float16 arithmetic (below 5.3)";
    tested = GetParam();
  }
};

// The layer of `c` with the tested 16-bit precision on the GPU against the same layer in float on the CPU.
void Compare16BitWithCpu(LayerCase c) {
  c.round_to = ElementTypeOf(GpuTest16Bit::tested);
  LayerParameter want, got;
  ReadProtoFromTextString(c.prototxt, &want);
  got = want;
  got.set_precision(GpuTest16Bit::tested);
  want.set_precision(FP32);
  CompareLayers(c, want, false, got, true);
}

TEST_F(GpuTestBf16, ABlobConvertsBetweenFloatAndBfloat16OnTheDevice) {
  Strata::set_mode(Strata::GPU);
  Blob<float> b({3, 5, 7});
  b.set_memory_category(MemoryCategory::kActivation);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-100, 100);
  std::vector<float> rounded(b.count());
  float* h = b.mutable_cpu_data();
  for (int i = 0; i < b.count(); ++i) {
    h[i] = u(gen);
    rounded[i] = from_bf16(to_bf16(h[i]));
  }
  h[0] = NAN;
  rounded[0] = NAN;
  const size_t device_before = MemoryTracker::current(MemoryCategory::kActivation, MemorySpace::kDevice);
  const uint64_t version = b.data()->version();
  b.gpu_data_16bit(DeviceFormat::kBf16);
  EXPECT_EQ(b.data()->device_format(), DeviceFormat::kBf16);
  EXPECT_EQ(b.data()->device_bytes(), b.count() * sizeof(bfloat16));
  EXPECT_EQ(MemoryTracker::current(MemoryCategory::kActivation, MemorySpace::kDevice) - device_before,
            b.count() * sizeof(bfloat16));
  // Rounding left the host's copy stale; reading it widens the device's values and keeps them in bfloat16.
  EXPECT_EQ(b.data()->head(), SyncedMemory::HEAD_AT_GPU);
  EXPECT_EQ(b.data()->version(), version) << "a read is not a write";
  const float* got = b.cpu_data();
  EXPECT_TRUE(std::isnan(got[0]));
  for (int i = 1; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
  EXPECT_EQ(b.data()->device_format(), DeviceFormat::kBf16);
  // A plain device read converts back in place.
  b.mutable_gpu_data();
  EXPECT_EQ(b.data()->device_format(), DeviceFormat::kPlain);
  EXPECT_EQ(b.data()->device_bytes(), b.count() * sizeof(float));
  EXPECT_GT(b.data()->version(), version);
  got = b.cpu_data();
  for (int i = 1; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
  // Writing every value in bfloat16 converts nothing: fresh memory in that format.
  b.mutable_gpu_data_16bit(DeviceFormat::kBf16, /*keep_values=*/false);
  EXPECT_EQ(b.data()->device_format(), DeviceFormat::kBf16);
  // The host's values replace a bfloat16 device copy.
  b.mutable_cpu_data()[1] = 1.00390625f;  // 1 + 2^-8: a tie, rounds to even (1)
  b.gpu_data();
  EXPECT_EQ(b.data()->device_format(), DeviceFormat::kPlain);
  b.mutable_gpu_data();  // the device's copy the only one, so that the read below copies it back
  EXPECT_EQ(b.cpu_data()[1], 1.00390625f);
  EXPECT_EQ(from_bf16(to_bf16(1.00390625f)), 1.0f);
}

// The same, with the GPU's 4-axis bottoms and top gradients handed in channels-last (as a convolution before the
// layer leaves them); `top_last`: the layer keeps that order (docs/gpu.md, "Channels-last").
void CompareChannelsLastWithCpu(LayerCase c, bool top_last = true) {
  c.channels_last = true;
  c.top_channels_last = top_last;
  Compare16BitWithCpu(c);
}

// Convolutions compute channels-last by default (gpu_options().channels_last); each case runs channels-first too.
// Channels-last (kBf16Nhwc): made from float and from channels-first bfloat16 on the device, read back on the host
// (widened and put back in order there) and on the device; made again for a new shape after a reshape; a blob of
// another shape sharing the memory sees bfloat16 in no order of its own.
TEST_F(GpuTestBf16, ABlobConvertsToChannelsLastAndBack) {
  Strata::set_mode(Strata::GPU);
  for (const std::vector<int>& shape : std::vector<std::vector<int>>{{2, 37, 5, 13}, {3, 64, 1, 1}, {2, 1, 9, 7}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    Blob<float> b(shape);
    b.set_memory_category(MemoryCategory::kActivation);
    std::mt19937 gen(5);
    std::uniform_real_distribution<float> u(-10, 10);
    std::vector<float> rounded(b.count());
    float* h = b.mutable_cpu_data();
    for (int i = 0; i < b.count(); ++i) {
      h[i] = u(gen);
      rounded[i] = from_bf16(to_bf16(h[i]));
    }
    b.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kBf16Nhwc);
    EXPECT_EQ(b.data()->device_bytes(), b.count() * sizeof(bfloat16));
    const float* got = b.cpu_data();  // widened and reordered on the host
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kBf16Nhwc) << "a host read leaves the device copy";
    // Reordered on the device, then read on the host (widened there, no reorder): the device's transpose alone. With
    // one channel or one position per image the two orders are the same bytes, so only the label changes.
    const bool same_bytes = shape[1] == 1 || shape[2] * shape[3] == 1;
    const void* nhwc = b.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
    const void* nchw = b.gpu_data_16bit(DeviceFormat::kBf16);
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kBf16);
    EXPECT_EQ(nchw == nhwc, same_bytes) << "relabelled rather than transposed";
    b.mutable_gpu_data_16bit(DeviceFormat::kBf16, /*keep_values=*/true);  // the device's copy the only one
    got = b.cpu_data();
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
    b.gpu_data_16bit(DeviceFormat::kBf16Nhwc);  // and back
    b.gpu_data();                             // to float on the device
    EXPECT_EQ(b.data_device_format(), DeviceFormat::kPlain);
    got = b.cpu_data();
    for (int i = 0; i < b.count(); ++i) ASSERT_EQ(got[i], rounded[i]) << i;
  }
  // Gradients too, and a writer of every value gets channels-last memory directly.
  Blob<float> g({2, 8, 3, 3});
  g.set_memory_category(MemoryCategory::kActivation);
  g.mutable_gpu_diff_16bit(DeviceFormat::kBf16Nhwc, /*keep_values=*/false);
  EXPECT_EQ(g.diff_device_format(), DeviceFormat::kBf16Nhwc);
  EXPECT_EQ(g.diff()->device_bytes(), g.count() * sizeof(bfloat16));
  // Reshaped (same count), the memory made for the old shape is no order of the new one's: a read converts it.
  Blob<float> r({2, 6, 4, 4});
  r.set_memory_category(MemoryCategory::kActivation);
  float* rh = r.mutable_cpu_data();
  for (int i = 0; i < r.count(); ++i) rh[i] = static_cast<float>(i % 251);  // exact in bfloat16
  r.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
  Blob<float> flat({2, 96});
  flat.ShareData(r);
  EXPECT_EQ(flat.data_device_format(), DeviceFormat::kBf16);
  const float* fh = flat.cpu_data();
  for (int i = 0; i < flat.count(); ++i) ASSERT_EQ(fh[i], static_cast<float>(i % 251)) << i;
  // On the device, that blob converts the memory with the shape it was made for, into channels-first.
  flat.mutable_gpu_data_16bit(DeviceFormat::kBf16, /*keep_values=*/true);
  EXPECT_EQ(r.data_device_format(), DeviceFormat::kBf16);
  fh = flat.cpu_data();
  for (int i = 0; i < flat.count(); ++i) ASSERT_EQ(fh[i], static_cast<float>(i % 251)) << i;
  r.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
  r.Reshape({2, 24, 2, 2});
  EXPECT_EQ(r.data_device_format(), DeviceFormat::kBf16);
  r.gpu_data_16bit(DeviceFormat::kBf16Nhwc);
  EXPECT_EQ(r.data_device_format(), DeviceFormat::kBf16Nhwc);
  const float* rb = r.cpu_data();
  for (int i = 0; i < r.count(); ++i) ASSERT_EQ(rb[i], static_cast<float>(i % 251)) << i;
}

TEST_P(GpuTest16Bit, ConvolutionsMatchTheCpuOnRoundedOperands) {
  for (bool channels_last : {true, false}) {
  SCOPED_TRACE(channels_last ? "channels-last" : "channels-first");
  const gpu_compare::ChannelsLastOption order(channels_last ? GpuOptions::ChannelsLast::k16Bit
                                                            : GpuOptions::ChannelsLast::kNone);
  // Channels-last, a case marked `nhwc` must keep its output channels-last (its bottom handed so too), so that the
  // KRSC weights, their gradient's reorder and the channels-innermost bias run; the others (one input channel,
  // groups) may compute channels-first, which cuDNN decides.
  auto compare = [&](const LayerCase& c, bool nhwc) {
    if (channels_last && nhwc) {
      CompareChannelsLastWithCpu(c);
    } else {
      Compare16BitWithCpu(c);
    }
  };
  const std::string conv = R"(name: "conv" type: "Convolution" convolution_param { weight_filler { type: "gaussian"
      std: 0.3 } bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";
  // LeNet's first layer (one input channel), strides and padding, groups, no bias, a 1x1, a deep one.
  compare({conv + "num_output: 20 kernel_size: 5 }", {{4, 1, 28, 28}}, 1, -1, 0, false, kBf16Bound}, false);
  compare({conv + "num_output: 16 kernel_size: 3 stride: 2 pad: 1 }", {{2, 8, 13, 11}}, 1, -1, 0, false, kBf16Bound},
          true);
  compare({conv + "num_output: 32 kernel_size: 3 pad: 1 group: 4 }", {{2, 16, 9, 9}}, 1, -1, 0, false, kBf16Bound},
          false);
  compare({conv + "num_output: 24 kernel_size: 1 bias_term: false }", {{3, 32, 7, 7}}, 1, -1, 0, false, kBf16Bound},
          true);
  compare({conv + "num_output: 64 kernel_size: 3 pad: 1 }", {{2, 64, 14, 14}}, 1, -1, 0, false, kBf16Bound}, true);
  const std::string deconv = R"(name: "deconv" type: "Deconvolution" convolution_param { weight_filler {
      type: "gaussian" std: 0.3 } bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";
  compare({deconv + "num_output: 16 kernel_size: 4 stride: 2 pad: 1 }", {{2, 8, 7, 6}}, 1, -1, 0, false, kBf16Bound},
          true);
  compare({deconv + "num_output: 8 kernel_size: 3 group: 2 bias_term: false }", {{2, 6, 5, 5}}, 1, -1, 0, false,
          kBf16Bound}, false);
  }
}

TEST_P(GpuTest16Bit, InnerProductMatchesTheCpuOnRoundedOperands) {
  const std::string ip = R"(name: "ip" type: "InnerProduct" inner_product_param { weight_filler { type: "gaussian"
      std: 0.2 } bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";
  Compare16BitWithCpu({ip + "num_output: 10 }", {{8, 50, 4, 4}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({ip + "num_output: 33 bias_term: false }", {{5, 70}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({ip + "num_output: 17 transpose: true }", {{6, 40}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({ip + "num_output: 12 axis: 2 }", {{2, 3, 20}}, 1, -1, 0, false, kBf16Bound});
  // The bias gradient's sum over many rows, of more outputs than one block of columns.
  Compare16BitWithCpu({ip + "num_output: 40 }", {{600, 20}}, 1, -1, 0, false, kBf16Bound});
}

TEST_P(GpuTest16Bit, ReLUAndPoolingMatchTheCpuOnRoundedOperands) {
  Compare16BitWithCpu({R"(name: "relu" type: "ReLU")", {{2, 6, 5, 7}}, 1, -1, 0, /*in_place=*/true, kBf16Bound});
  Compare16BitWithCpu({R"(name: "leaky" type: "ReLU" relu_param { negative_slope: 0.1 })", {{2, 6, 5, 7}}, 1, -1, 0,
                      false, kBf16Bound});
  // MAX picks one of the rounded values, and without overlapping windows each input's gradient is one top's:
  // exact. With overlaps the gradients add up, and AVE rounds its mean and the gradient's shares.
  Compare16BitWithCpu({R"(name: "max" type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 })",
                      {{2, 5, 12, 10}}, 1, -1, 0, false, 1e-7});
  Compare16BitWithCpu({R"(name: "max" type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 })",
                      {{2, 5, 11, 10}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({R"(name: "ave" type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 })",
                      {{2, 5, 11, 10}}, 1, -1, 0, false, kBf16Bound});
}

TEST_P(GpuTest16Bit, NormalisationSumsCopiesAndDropoutMatchTheCpuOnRoundedOperands) {
  for (const LayerCase& c : gpu_compare::BatchNormCases(kBf16Bound)) Compare16BitWithCpu(c);
  Compare16BitWithCpu({R"(name: "sum" type: "Eltwise" eltwise_param { operation: SUM coeff: 1 coeff: -0.5 })",
                      {{2, 4, 6, 5}, {2, 4, 6, 5}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({R"(name: "sum3" type: "Eltwise")", {{2, 4, 6, 5}, {2, 4, 6, 5}, {2, 4, 6, 5}}, 1, -1, 0,
                      false, kBf16Bound});
  Compare16BitWithCpu({R"(name: "lrn" type: "LRN" lrn_param { local_size: 5 alpha: 0.1 beta: 0.75 })",
                      {{2, 7, 5, 4}}, 1, -1, 0, false, kBf16Bound});
  Compare16BitWithCpu({R"(name: "lrn" type: "LRN" lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL })",
                      {{2, 3, 6, 5}}, 1, -1, 0, false, kBf16Bound});
  // Copies: exact.
  Compare16BitWithCpu({R"(name: "concat" type: "Concat")", {{2, 3, 4, 5}, {2, 5, 4, 5}}, 1, -1, 0, false, 1e-7});
  Compare16BitWithCpu({R"(name: "drop" type: "Dropout" dropout_param { dropout_ratio: 0.3 })", {{3, 7, 5, 4}}, 1,
                      -1, 0, false, kBf16Bound});
}

// Every layer with 16-bit GPU code that follows its bottom's order keeps channels-last through forward and
// backward; those that read channels-first (InnerProduct, Dropout, a Concat along a spatial axis) convert.
TEST_P(GpuTest16Bit, LayersAfterAConvolutionKeepChannelsLastAndMatchTheCpu) {
  for (const gpu_compare::OrderCase& c : gpu_compare::FollowerCases(kBf16Bound)) {
    CompareChannelsLastWithCpu(c.layer, c.top_last);
  }
}

TEST_P(GpuTest16Bit, NetStepsFollowTheFloatSteps) {
  for (bool channels_last : {true, false}) {
  SCOPED_TRACE(channels_last ? "channels-last" : "channels-first");
  const gpu_compare::ChannelsLastOption order(channels_last ? GpuOptions::ChannelsLast::k16Bit
                                                            : GpuOptions::ChannelsLast::kNone);
  // Between the convolutions and the first InnerProduct, activations are in the convolutions' order.
  const ElementType type = ElementTypeOf(GetParam());
  const DeviceFormat images = device_format_for(type, channels_last);
  Strata::set_mode(Strata::GPU);
  NetParameter param;
  ReadProtoFromTextString(gpu_compare::kResidualNet, &param);
  param.mutable_state()->set_phase(TRAIN);
  Net<float> reference(param);
  param.set_precision(GetParam());
  Net<float> net(param);
  for (const char* name : {"conv1", "conv2", "ip1", "ip2", "relu1", "pool1", "pool2", "bn_a", "res", "conv_b"}) {
    EXPECT_TRUE(net.layer_by_name(name)->ComputesIn16Bit()) << name;
  }
  EXPECT_FALSE(net.layer_by_name("loss")->ComputesIn16Bit());
  ASSERT_EQ(net.learnable_params().size(), reference.learnable_params().size());
  gpu_compare::CopyWeights(reference, &net);
  const gpu_compare::ResidualBatch batch;
  for (int step = 0; step < 5; ++step) {
    float losses[2];
    Net<float>* nets[2] = {&reference, &net};
    for (int k = 0; k < 2; ++k) {
      losses[k] = gpu_compare::ResidualNetStep(*nets[k], batch);
    }
    ASSERT_TRUE(std::isfinite(losses[1]));
    EXPECT_NEAR(losses[1], losses[0], 0.02 * std::fabs(losses[0])) << "step " << step;
    // Activations between 16-bit layers stay in 16 bits (through the residual block and its Split); the weights
    // and the loss's input are float.
    EXPECT_EQ(net.blob_by_name("pool1")->data_device_format(), images);
    EXPECT_EQ(net.blob_by_name("pool1")->diff_device_format(), images);
    EXPECT_EQ(net.blob_by_name("conv_a")->data_device_format(), images);
    EXPECT_EQ(net.blob_by_name("res")->diff_device_format(), images);
    EXPECT_EQ(net.blob_by_name("conv2")->diff_device_format(), images);
    // InnerProduct reads channels-first, so pool2 was converted for it.
    EXPECT_EQ(net.blob_by_name("pool2")->data_device_format(), device_format_for(type, false));
    EXPECT_EQ(net.blob_by_name("ip1")->data_device_format(), device_format_for(type, false));
    EXPECT_EQ(net.blob_by_name("ip2")->data_device_format(), DeviceFormat::kPlain);
    for (Blob<float>* p : net.learnable_params()) EXPECT_EQ(p->data()->device_format(), DeviceFormat::kPlain);
  }
  for (size_t i = 0; i < net.learnable_params().size(); ++i) {
    const Blob<float>& got = *net.learnable_params()[i];
    const Blob<float>& want = *reference.learnable_params()[i];
    EXPECT_LT(NormalisedError(got.cpu_data(), want.cpu_data(), got.count()), kBf16Bound) << "parameter " << i;
  }
  }
}

INSTANTIATE_TEST_SUITE_P(GpuTest, GpuTest16Bit, ::testing::Values(BF16, FP16),
                         [](const ::testing::TestParamInfo<Precision>& info) { return Precision_Name(info.param); });

}  // namespace
}  // namespace strata
