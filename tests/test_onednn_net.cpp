// A whole ResNet-style net (convolutions without bias, BatchNorm + Scale, residual sums with an identity and a
// projection shortcut, max and global average pooling) trains 5 SGD steps once on the CAFFE engine and once with
// every layer that has a oneDNN engine on it: the losses and every parameter (BatchNorm's running statistics
// included) agree within 1e-5 relative (docs/onednn.md). A layer-by-layer match can still drift apart over
// updates through a net; this is the test that it does not. The same net, wide enough for oneDNN's channel-blocked
// layout, trains alike with activations left blocked between layers and with every blob plain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layer_engines.hpp"
#include "strata/layers/convolution_layer.hpp"
#include "strata/memory_format.hpp"
#include "strata/net.hpp"
#include "strata/onednn.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// Convolution (no bias) + BatchNorm + Scale on `bottom`, in place from the convolution on, and a ReLU when `relu`.
std::string ConvBn(const std::string& name, const std::string& bottom, int outputs, int kernel, int stride,
                   bool relu) {
  const std::string conv = "layer { name: '" + name + "' type: 'Convolution' bottom: '" + bottom + "' top: '" + name +
                           "' convolution_param { num_output: " + std::to_string(outputs) +
                           " kernel_size: " + std::to_string(kernel) + " pad: " + std::to_string(kernel / 2) +
                           " stride: " + std::to_string(stride) +
                           " bias_term: false weight_filler { type: 'msra' } } }\n";
  auto in_place = [&](const std::string& type, const std::string& param) {
    return "layer { name: '" + name + "_" + type + "' type: '" + type + "' bottom: '" + name + "' top: '" + name +
           "' " + param + " }\n";
  };
  return conv + in_place("BatchNorm", "batch_norm_param { }") + in_place("Scale", "scale_param { bias_term: true }") +
         (relu ? in_place("ReLU", "relu_param { }") : "");
}

// top = ReLU(a + b).
std::string ResidualSum(const std::string& top, const std::string& a, const std::string& b) {
  return "layer { name: '" + top + "' type: 'Eltwise' bottom: '" + a + "' bottom: '" + b + "' top: '" + top +
         "' eltwise_param { operation: SUM } }\n" + "layer { name: '" + top + "_relu' type: 'ReLU' bottom: '" + top +
         "' top: '" + top + "' relu_param { } }\n";
}

// `width` channels in the first blocks, twice as many in the last.
std::string ResNetStyle(int width = 8) {
  return R"(
    name: "resnet_style"
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 dim: 12 dim: 12 } } }
    layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 4 } } }
  )" + ConvBn("conv1", "x", width, 3, 1, true) +
         R"(layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
                    pooling_param { pool: MAX kernel_size: 3 stride: 2 } })" "\n" +
         // An identity block.
         ConvBn("conv2a", "pool1", width, 3, 1, true) + ConvBn("conv2b", "conv2a", width, 3, 1, false) +
         ResidualSum("res2", "pool1", "conv2b") +
         // A block that halves the image, with a projection shortcut.
         ConvBn("conv3a", "res2", 2 * width, 3, 2, true) + ConvBn("conv3b", "conv3a", 2 * width, 3, 1, false) +
         ConvBn("proj3", "res2", 2 * width, 1, 2, false) + ResidualSum("res3", "proj3", "conv3b") + R"(
    layer { name: "pool3" type: "Pooling" bottom: "res3" top: "pool3" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "fc" type: "InnerProduct" bottom: "pool3" top: "fc"
            inner_product_param { num_output: 5 weight_filler { type: "xavier" }
                                  bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "y" top: "loss" softmax_param { } }
  )";
}

using layer_engines::SetEngines;

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // every parameter blob, running statistics included
  std::vector<std::string> blocked;        // the blobs whose values the last step left channel-blocked
  std::vector<std::string> absorbed;       // the layers another absorbed (Layer::Absorb)
  std::vector<int> custom;                 // the parameter blobs the last step left in a layer's CustomFormat
};

// Sets a process-wide switch for its scope and restores it after: whether nets built in the scope may leave blobs
// blocked (BlockedLayouts), fuse layers (Fusion), keep parameters in their layers' layouts (ParamLayouts).
template <bool (*Get)(), void (*Set)(bool)>
class ScopedSwitch {
 public:
  explicit ScopedSwitch(bool enabled) : before_(Get()) { Set(enabled); }
  ~ScopedSwitch() { Set(before_); }

 private:
  bool before_;
};
using BlockedLayouts = ScopedSwitch<blocked_layouts_enabled, set_blocked_layouts_enabled>;
using Fusion = ScopedSwitch<Net<float>::layer_fusion_enabled, Net<float>::set_layer_fusion_enabled>;
using ParamLayouts = ScopedSwitch<param_layouts_enabled, set_param_layouts_enabled>;

Trained Train(const std::string& engine, int steps, Precision precision = FP32, int width = 8,
              const std::string& net_text = "") {
  SolverParameter p;
  ReadProtoFromTextString("base_lr: 0.05 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'fixed' random_seed: 1701 "
                          "display: 0 snapshot_after_train: false max_iter: 100",
                          &p);
  ReadProtoFromTextString(net_text.empty() ? ResNetStyle(width) : net_text, p.mutable_net_param());
  SetEngines(p.mutable_net_param(), engine);
  p.set_precision(precision);
  auto solver = SolverRegistry<float>::Create(p);
  Net<float>& net = *solver->net();
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss(0.f, 1.f);
  Blob<float>* x = net.blob_by_name("x").get();
  for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = gauss(rng);
  float* y = net.blob_by_name("y")->mutable_cpu_data();
  for (int i = 0; i < 4; ++i) y[i] = static_cast<float>(i % 5);
  Trained t;
  for (int s = 0; s < steps; ++s) {
    solver->Step(1);
    t.losses.push_back(net.blob_by_name("loss")->cpu_data()[0]);
  }
  for (const std::string& name : net.blob_names()) {
    if (net.blob_by_name(name)->data_layout() == MemoryFormat::kBlocked16) t.blocked.push_back(name);
  }
  for (const auto& layer : net.layers()) {
    if (layer->absorbed()) t.absorbed.push_back(layer->layer_param().name());
  }
  for (size_t i = 0; i < net.params().size(); ++i) {
    if (net.params()[i]->data_custom_layout()) t.custom.push_back(static_cast<int>(i));
  }
  for (const auto& blob : net.params()) t.params.emplace_back(blob->cpu_data(), blob->cpu_data() + blob->count());
  return t;
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The reference learns (the comparison is of a run that moves), and every loss and parameter blob of `got` is
// within 1e-5 relative of it.
void ExpectSameTraining(const Trained& got, const Trained& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  EXPECT_LT(want.losses.back(), want.losses.front());
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::fabs(want.losses[s])) << "step " << s;
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) {
    EXPECT_LE(RelativeError(got.params[i], want.params[i]), 1e-5) << "parameter blob " << i;
  }
}

// `net` trained 5 steps with fusion on absorbs exactly `absorbed` and trains as with fusion off, which absorbs
// nothing.
void ExpectFusedTrainsAsSeparate(const std::string& net, const std::vector<std::string>& absorbed) {
  Trained separate, fused;
  {
    Fusion off(false);
    separate = Train("DEFAULT", 5, FP32, 0, net);
  }
  {
    Fusion on(true);
    fused = Train("DEFAULT", 5, FP32, 0, net);
  }
  EXPECT_TRUE(separate.absorbed.empty());
  EXPECT_EQ(fused.absorbed, absorbed);
  ExpectSameTraining(fused, separate);
}

TEST(OneDnnNet, ResNetStyleNetTrainsAsOnTheCaffeEngine) {
  ExpectSameTraining(Train("ONEDNN", 5), Train("CAFFE", 5));
}

// The engines really differ in this net (so the test above compares two computations, not one twice): the CAFFE
// run and the oneDNN run do not produce the same bits.
TEST(OneDnnNet, TheTwoRunsComputeDifferently) {
  const Trained caffe = Train("CAFFE", 1);
  const Trained onednn = Train("ONEDNN", 1);
  bool differ = false;
  for (size_t i = 0; i < caffe.params.size() && !differ; ++i) differ = caffe.params[i] != onednn.params[i];
  EXPECT_TRUE(differ);
}

// precision: the solver's reaches every net and layer that sets none; a net's own or a layer's own wins.
TEST(OneDnnNet, PrecisionPassesFromSolverToNetToLayer) {
  SolverParameter p;
  ReadProtoFromTextString("precision: BF16", &p);
  // Width 16: oneDNN has bfloat16 kernels of its own for those channel counts (a convolution whose bfloat16 passes
  // would fall to its GEMM-based fallback computes in float, onednn_convolution.cpp).
  ReadProtoFromTextString(ResNetStyle(16), p.mutable_net_param());
  p.mutable_net_param()->mutable_layer(2)->set_precision(FP32);  // conv1 keeps float
  p.add_test_iter(1);
  NetParameter train = TrainNetParam(p);
  EXPECT_EQ(train.precision(), BF16);
  EXPECT_EQ(TestNetParams(p).at(0).precision(), BF16);
  Net<float> net(train);
  for (const auto& layer : net.layers()) {
    const LayerParameter& lp = layer->layer_param();
    EXPECT_EQ(lp.precision(), lp.name() == "conv1" ? FP32 : BF16) << lp.name();
    if (lp.type() != "Convolution") continue;
    // A convolution multiplies in bfloat16 where oneDNN has the kernels and the layer asks for it.
    const auto* conv = dynamic_cast<const ConvolutionLayer<float>*>(layer.get());
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->ComputesIn16Bit(), lp.precision() == BF16 && onednn_has_bf16()) << lp.name();
  }
  // The net's own precision wins over the solver's.
  p.mutable_net_param()->set_precision(FP32);
  EXPECT_EQ(TrainNetParam(p).precision(), FP32);
}

// The ResNet-style net trains in bfloat16: its loss falls as the float run's does, and stays near it (bfloat16's
// rounding moves each step by well under a percent here). Wide enough for the blocked layout: where oneDNN's
// bfloat16 kernels compute channel-blocked (AVX512-BF16, this machine), they read blocked float activations too;
// where they compute NHWC (AMX, as on the H200 machines' CPU, docs/gpu.md), the net leaves its activations plain.
TEST(OneDnnNet, ResNetStyleNetTrainsInBf16) {
  BlockedLayouts on(true);  // whatever STRATA_BLOCKED_LAYOUTS says
  const Trained fp32 = Train("ONEDNN", 5, FP32, 16);
  const Trained bf16 = Train("ONEDNN", 5, BF16, 16);
  EXPECT_FALSE(fp32.blocked.empty());
  EXPECT_LT(bf16.losses.back(), bf16.losses.front());
  for (size_t s = 0; s < fp32.losses.size(); ++s)
    EXPECT_NEAR(bf16.losses[s], fp32.losses[s], 2e-2 * std::fabs(fp32.losses[s])) << "step " << s;
}

// Activations left in oneDNN's channel-blocked layout between the layers that read it (convolutions, BatchNorm,
// Scale, ReLU, the residual sums and their splits, oneDNN's pooling) train the net as plain ones do: every loss and
// parameter within 1e-5. In the width-16 net everything from conv1 to res3 stays blocked; pool3 feeds the
// InnerProduct, which reads plain. The second net has pool1 also output its argmax, which only Strata's own
// pooling loops give, so pool1 reads and writes plain: conv1 stays plain, and res2 sums the plain pooled input
// (converting it in place) and the blocked conv2b. The test checks which blobs each blocked run left blocked, and that the plain runs left none.
TEST(OneDnnNet, BlockedLayoutsTrainAsPlainOnes) {
  std::string with_mask = ResNetStyle(16);
  const std::string pool1 = R"(bottom: "conv1" top: "pool1")";
  ASSERT_NE(with_mask.find(pool1), std::string::npos);
  with_mask.replace(with_mask.find(pool1), pool1.size(), pool1 + R"( top: "pool1_mask")");
  // A U-Net-style way back: res3 (32 channels, 3 x 3) up-sampled by a Deconvolution to res2's 16 x 6 x 6 and added
  // to it; the global pooling then reads that sum.
  std::string with_deconv = ResNetStyle(16);
  const std::string pool3 = R"(bottom: "res3" top: "pool3")";
  ASSERT_NE(with_deconv.find(pool3), std::string::npos);
  with_deconv.replace(with_deconv.find(pool3), pool3.size(), R"(bottom: "mix" top: "pool3")");
  const std::string up = R"(
    layer { name: "up" type: "Deconvolution" bottom: "res3" top: "up"
            convolution_param { num_output: 16 kernel_size: 2 stride: 2 weight_filler { type: "msra" } } }
    layer { name: "mix" type: "Eltwise" bottom: "up" bottom: "res2" top: "mix" eltwise_param { operation: SUM } }
  )";
  with_deconv.insert(with_deconv.find(R"(layer { name: "pool3")"), up);
  struct Case {
    std::string name, net;
    std::vector<std::string> blocked, plain;
  };
  const std::vector<Case> cases{
      {"all blocked", ResNetStyle(16),
       {"conv1", "pool1", "conv2a", "conv2b", "res2", "conv3a", "conv3b", "proj3", "res3"},
       {"pool3", "fc"}},
      {"pool1 plain", with_mask, {"conv2a", "conv2b", "res2", "conv3a", "conv3b", "proj3", "res3"},
       {"conv1", "pool1_mask", "pool3"}},
      {"deconvolution", with_deconv, {"res2", "res3", "up", "mix"}, {"pool3", "fc"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Trained plain, blocked;
    {
      BlockedLayouts off(false);
      plain = Train("DEFAULT", 5, FP32, 16, c.net);
    }
    {
      BlockedLayouts on(true);
      blocked = Train("DEFAULT", 5, FP32, 16, c.net);
    }
    EXPECT_TRUE(plain.blocked.empty());
    const auto was_blocked = [&](const std::string& name) {
      return std::find(blocked.blocked.begin(), blocked.blocked.end(), name) != blocked.blocked.end();
    };
    for (const std::string& name : c.blocked) EXPECT_TRUE(was_blocked(name)) << name;
    for (const std::string& name : c.plain) EXPECT_FALSE(was_blocked(name)) << name;
    ExpectSameTraining(blocked, plain);
  }
}

// The convolutions on oneDNN keep their weights and weight gradients in the layout oneDNN computes the gradient in,
// and the solver updates them there: in float and in bfloat16, the run trains bit for bit as the one with plain
// weights (the same kernels read the same values; the update is elementwise). The weights of every convolution of
// 16 input channels or more end in such a layout, and no other parameter's do (BatchNorm's statistics, Scale's, the
// inner product's stay plain).
TEST(OneDnnNet, WeightsInOneDnnLayoutsTrainBitForBitAsPlainOnes) {
  for (Precision precision : {FP32, BF16}) {
    SCOPED_TRACE(Precision_Name(precision));
    Trained plain, laid_out;
    {
      ParamLayouts off(false);
      plain = Train("DEFAULT", 5, precision, 16);
    }
    {
      ParamLayouts on(true);
      laid_out = Train("DEFAULT", 5, precision, 16);
    }
    EXPECT_TRUE(plain.custom.empty());
    // ResNetStyle's parameters: conv1 (0), its BatchNorm (1-3) and Scale (4-5), and so on, 6 per ConvBn. Every
    // convolution of 16 or 32 input channels keeps a layout of oneDNN's; conv1 (3 input channels) does where its
    // gradient's format has no padding (AVX512-BF16 here, not with AMX's bfloat16 kernels).
    const std::vector<int> conv_weights{0, 6, 12, 18, 24, 30};
    std::vector<int> expected = laid_out.custom;
    expected.erase(std::remove(expected.begin(), expected.end(), 0), expected.end());
    EXPECT_EQ(expected, std::vector<int>(conv_weights.begin() + 1, conv_weights.end()));
    EXPECT_LT(plain.losses.back(), plain.losses.front());
    EXPECT_EQ(laid_out.losses, plain.losses);
    ASSERT_EQ(laid_out.params.size(), plain.params.size());
    for (size_t i = 0; i < plain.params.size(); ++i) EXPECT_EQ(laid_out.params[i], plain.params[i]) << "blob " << i;
  }
}

// An inception-style block (GoogLeNet's): three branches from one input, a 1x1 and a 3x3 convolution and a 3x3
// max pooling, joined by Concat along the channels (16 + 32 + 16), then a strided convolution. In the channel-blocked
// layout Concat copies the same runs as in the plain one; `mask_branch` has the pooling branch also output its
// argmax, so that branch runs Strata's own loops, reads and writes plain, and Concat joins plain and blocked bottoms.
std::string InceptionStyle(bool mask_branch) {
  return R"(
    name: "inception_style"
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 dim: 12 dim: 12 } } }
    layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 4 } } }
  )" + ConvBn("stem", "x", 16, 3, 1, true) + ConvBn("inc_a", "stem", 16, 1, 1, true) +
         ConvBn("inc_b", "stem", 32, 3, 1, true) +
         R"(layer { name: "inc_c" type: "Pooling" bottom: "stem" top: "inc_c" )" +
         (mask_branch ? R"(top: "inc_c_mask" )" : "") + R"(pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
    layer { name: "inc" type: "Concat" bottom: "inc_a" bottom: "inc_b" bottom: "inc_c" top: "inc" }
  )" + ConvBn("conv2", "inc", 16, 3, 2, true) + R"(
    layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
            inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "y" top: "loss" }
  )";
}

TEST(OneDnnNet, BlockedConcatTrainsAsPlain) {
  for (bool mask_branch : {false, true}) {
    SCOPED_TRACE(mask_branch ? "a plain branch" : "all blocked");
    Trained plain, blocked;
    {
      BlockedLayouts off(false);
      plain = Train("DEFAULT", 5, FP32, 16, InceptionStyle(mask_branch));
    }
    {
      BlockedLayouts on(true);
      blocked = Train("DEFAULT", 5, FP32, 16, InceptionStyle(mask_branch));
    }
    EXPECT_TRUE(plain.blocked.empty());
    const auto was_blocked = [&](const std::string& name) {
      return std::find(blocked.blocked.begin(), blocked.blocked.end(), name) != blocked.blocked.end();
    };
    for (const std::string name : {"inc_a", "inc_b", "inc", "conv2"}) EXPECT_TRUE(was_blocked(name)) << name;
    EXPECT_FALSE(was_blocked("pool2"));
    if (mask_branch) {
      // Strata's pooling loops read the stem, so it stays plain (as does the argmax); the join converted inc_c.
      EXPECT_FALSE(was_blocked("stem"));
      EXPECT_FALSE(was_blocked("inc_c_mask"));
    } else {
      EXPECT_TRUE(was_blocked("stem"));
      EXPECT_TRUE(was_blocked("inc_c"));
    }
    ExpectSameTraining(blocked, plain);
  }
}

// BatchNorm absorbs the Scale and ReLU after it (two passes forward and backward instead of six and seven), and a
// residual sum its ReLU: the fused net trains as the unfused one, in the plain layout (width 8) and the blocked
// one (width 16), and every Scale and ReLU that follows a BatchNorm or a sum in place was absorbed.
TEST(OneDnnNet, FusedBatchNormScaleReluTrainsAsSeparateLayers) {
  for (int width : {8, 16}) {
    SCOPED_TRACE("width " + std::to_string(width));
    Trained separate, fused;
    {
      Fusion off(false);
      separate = Train("DEFAULT", 5, FP32, width);
    }
    {
      Fusion on(true);
      fused = Train("DEFAULT", 5, FP32, width);
    }
    EXPECT_TRUE(separate.absorbed.empty());
    const std::vector<std::string> expected{"conv1_Scale", "conv1_ReLU",  "conv2a_Scale", "conv2a_ReLU",
                                            "conv2b_Scale", "res2_relu",  "conv3a_Scale", "conv3a_ReLU",
                                            "conv3b_Scale", "proj3_Scale", "res3_relu"};
    EXPECT_EQ(fused.absorbed, expected);
    ExpectSameTraining(fused, separate);
  }
}

// An absorbed layer's parameters are read by the absorbing layer's forward and final after its backward: the
// data-parallel engine and the solver's per-layer updates wait on, and update after, that layer instead.
TEST(OneDnnNet, AbsorbedParametersBelongToTheAbsorbingLayer) {
  Fusion on(true);
  NetParameter p;
  ReadProtoFromTextString(ResNetStyle(), &p);
  p.mutable_state()->set_phase(TRAIN);  // BatchNorm absorbs in TRAIN only
  Net<float> net(p);
  const auto index = [&](const std::string& name) {
    const auto& names = net.layer_names();
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  const int bn = index("conv2a_BatchNorm"), scale = index("conv2a_Scale");
  ASSERT_EQ(scale, bn + 1);
  ASSERT_TRUE(net.layers()[scale]->absorbed());
  EXPECT_TRUE(net.learnable_params_final_after(scale).empty());
  EXPECT_TRUE(net.learnable_params_of_layer(scale).empty());
  // BatchNorm's three statistics and the Scale's two parameters.
  EXPECT_EQ(net.learnable_params_final_after(bn).size(), 5u);
  EXPECT_EQ(net.learnable_params_of_layer(bn).size(), 5u);
  const Blob<float>* gamma = net.layers()[scale]->blobs()[0].get();
  const auto& final_after = net.learnable_params_final_after(bn);
  EXPECT_TRUE(std::any_of(final_after.begin(), final_after.end(),
                          [&](int id) { return net.learnable_params()[id] == gamma; }));
}

// The other forms: a Scale without bias, a ReLU with a negative slope, a BatchNorm that is not in place, and a sum
// of three with coefficients and a leaky ReLU. (The
// convolution has no bias, as before any BatchNorm: its gradient would be rounding noise around 0, which no
// relative bound compares.)
TEST(OneDnnNet, FusedBatchNormWithoutBiasAndWithLeakyReluTrainsAsSeparateLayers) {
  const std::string net = R"(
    name: "leaky"
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } } }
    layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 4 } } }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "conv"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false
                                weight_filler { type: "msra" } } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "bn" }
    layer { name: "scale" type: "Scale" bottom: "bn" top: "bn" scale_param { bias_term: false } }
    layer { name: "relu" type: "ReLU" bottom: "bn" top: "bn" relu_param { negative_slope: 0.1 } }
    layer { name: "c2" type: "Convolution" bottom: "x" top: "c2"
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: "msra" } } }
    layer { name: "c3" type: "Convolution" bottom: "x" top: "c3"
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: "msra" } } }
    layer { name: "sum" type: "Eltwise" bottom: "bn" bottom: "c2" bottom: "c3" top: "sum"
            eltwise_param { operation: SUM coeff: 1 coeff: 0.5 coeff: -1 } }
    layer { name: "sum_relu" type: "ReLU" bottom: "sum" top: "sum" relu_param { negative_slope: 0.2 } }
    layer { name: "fc" type: "InnerProduct" bottom: "sum" top: "fc"
            inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "y" top: "loss" }
  )";
  ExpectFusedTrainsAsSeparate(net, {"scale", "relu", "sum_relu"});
}

// A Convolution on oneDNN absorbs the ReLU in place after it (a post-op of its forward primitive): with and
// without bias, with channels in blocks of 16 (the blocked layout) and not (NHWC), after a plain input, strided;
// a leaky ReLU is left apart. Fused and separate layers train alike, every loss and parameter within 1e-5.
TEST(OneDnnNet, ConvolutionAbsorbsItsReluAndTrainsAsSeparateLayers) {
  const std::string net = R"(
    name: "conv_relu"
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 4 dim: 3 dim: 12 dim: 12 } } }
    layer { name: "y" type: "Input" top: "y" input_param { shape { dim: 4 } } }
    layer { name: "c1" type: "Convolution" bottom: "x" top: "c1"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                                bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
    layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2"
            convolution_param { num_output: 20 kernel_size: 3 bias_term: false weight_filler { type: "msra" } } }
    layer { name: "r2" type: "ReLU" bottom: "c2" top: "c2" }
    layer { name: "c3" type: "Convolution" bottom: "c2" top: "c3"
            convolution_param { num_output: 16 kernel_size: 3 stride: 2 weight_filler { type: "msra" } } }
    layer { name: "r3" type: "ReLU" bottom: "c3" top: "c3" }
    layer { name: "c4" type: "Convolution" bottom: "c3" top: "c4"
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: "msra" } } }
    layer { name: "r4" type: "ReLU" bottom: "c4" top: "c4" relu_param { negative_slope: 0.1 } }
    layer { name: "pool" type: "Pooling" bottom: "c4" top: "pool" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
            inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "y" top: "loss" }
  )";
  ExpectFusedTrainsAsSeparate(net, {"r1", "r2", "r3"});
}

}  // namespace
}  // namespace strata
