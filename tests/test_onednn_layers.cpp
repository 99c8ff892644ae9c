// What only the oneDNN engines have (docs/onednn.md): sweeps over random pooling windows (which oneDNN may refuse),
// inner products, LRN, ReLU and Softmax against the CAFFE engine, the bfloat16 rounding rules, same bits run to
// run, absorbing a ReLU, and the engine choice and its errors. What every backend of a layer owes (its gradient
// check, matching CAFFE on the CPU, the convolutions' random windows, fusion on and off) is in the layer's own
// test file (layer_engines.hpp).
//
// Tolerance: an output matches when |onednn - caffe| <= 1e-5 * max|caffe| over the blob, i.e. 1e-5 relative to
// the blob's largest magnitude. Element-wise relative error is no measure for sums whose terms cancel (an output
// near 0 carries the rounding of its large terms), and both engines round such sums in different orders.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "conv_cases.hpp"
#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/convolution_layer.hpp"
#include "strata/layers/deconvolution_layer.hpp"
#include "strata/layers/inner_product_layer.hpp"
#include "strata/layers/lrn_layer.hpp"
#include "strata/layers/pooling_layer.hpp"
#include "strata/layers/relu_layer.hpp"
#include "strata/layers/softmax_layer.hpp"
#include "strata/memory_format.hpp"
#include "strata/math_functions.hpp"
#include "strata/onednn.hpp"
#include "strata/parallel.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using conv_cases::ConvCase;
using conv_cases::ConvParam;
using conv_cases::Picker;
using conv_cases::RandomConvCases;
using conv_cases::RandomDeconvCases;

constexpr double kRelTol = 1e-5;

// max |got - want| / max |want| over two blobs' values.
double RelativeError(const float* got, const float* want, int n) {
  double diff = 0, scale = 0;
  for (int i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

void Fill(Blob<float>* b, std::mt19937* rng, bool diff = false) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  float* p = diff ? b->mutable_cpu_diff() : b->mutable_cpu_data();
  for (int i = 0; i < b->count(); ++i) p[i] = u(*rng);
}

// A layer's parameters from prototxt text.
LayerParameter FromText(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString(text, &p);
  return p;
}

// `v` rounded to the nearest bfloat16 (ties to even), as oneDNN's conversions round.
float RoundToBf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

void RoundToBf16(float* p, int n) {
  for (int i = 0; i < n; ++i) p[i] = RoundToBf16(p[i]);
}

// Draws the parameters of a set-up layer, runs it forward, draws the top gradient and runs `backwards` backward
// passes. The parameter gradients start away from 0 (at 0.25): they must be added to, never overwritten; the
// input gradient starts at 7 and must be overwritten. `round_to_bf16` rounds the weights (blob 0) and the top
// gradient to bfloat16 (with an input so rounded, the float reference of a BF16 layer; the bias is added in float).
void RunPasses(Layer<float>* layer, Blob<float>* x, Blob<float>* y, std::mt19937* rng, int backwards,
               bool round_to_bf16 = false) {
  for (auto& b : layer->blobs()) {
    Fill(b.get(), rng);
    cpu_set(b->count(), 0.25f, b->mutable_cpu_diff());
  }
  if (round_to_bf16) RoundToBf16(layer->blobs()[0]->mutable_cpu_data(), layer->blobs()[0]->count());
  layer->Forward({x}, {y});
  Fill(y, rng, true);
  if (round_to_bf16) RoundToBf16(y->mutable_cpu_diff(), y->count());
  cpu_set(x->count(), 7.f, x->mutable_cpu_diff());
  for (int i = 0; i < backwards; ++i) layer->Backward({y}, {true}, {x});
}

// One forward and backward of a convolution: random input, weights and output gradient from `seed`. The layer has
// `precision`; `round_operands` rounds the input, the weights and the output gradient to bfloat16 first (the
// float reference of a BF16 layer).
struct ConvRun {
  std::vector<float> top, bottom_diff, weight_diff, bias_diff;
  bool bf16 = false;  // the layer multiplied in bfloat16
};

ConvRun RunConv(const ConvCase& c, ConvolutionParameter::Engine engine, unsigned seed,
                Layer<float>* reuse = nullptr, Precision precision = FP32, bool round_operands = false) {
  std::mt19937 rng(seed);
  Blob<float> x({c.num, c.channels, c.height, c.width}), y;
  Fill(&x, &rng);
  if (round_operands) RoundToBf16(x.mutable_cpu_data(), x.count());
  std::unique_ptr<Layer<float>> own;
  Layer<float>* layer = reuse;
  if (!layer) {
    LayerParameter param = ConvParam(c, engine);
    if (precision != FP32) param.set_precision(precision);
    if (c.deconv) {
      own = std::make_unique<DeconvolutionLayer<float>>(param);
    } else {
      own = std::make_unique<ConvolutionLayer<float>>(param);
    }
    layer = own.get();
  }
  // A reused layer, once set up, only reshapes, as a net's layer does when its input changes shape.
  if (reuse && !layer->blobs().empty()) {
    layer->Reshape({&x}, {&y});
  } else {
    layer->SetUp({&x}, {&y});
  }
  RunPasses(layer, &x, &y, &rng, 1, round_operands);
  auto values = [](const float* p, int n) { return std::vector<float>(p, p + n); };
  ConvRun r{values(y.cpu_data(), y.count()), values(x.cpu_diff(), x.count()),
            values(layer->blobs()[0]->cpu_diff(), layer->blobs()[0]->count()), {}};
  if (c.bias) r.bias_diff = values(layer->blobs()[1]->cpu_diff(), layer->blobs()[1]->count());
  r.bf16 = layer->ComputesIn16Bit();
  return r;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                 const ConvCase& c) {
  ASSERT_EQ(got.size(), want.size()) << what << ", " << c;
  EXPECT_LE(RelativeError(got.data(), want.data(), static_cast<int>(got.size())), kRelTol) << what << ", " << c;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class OneDnnTest : public ::testing::Test {
 protected:
  void TearDown() override { set_compute_threads(saved_); }
  int saved_ = compute_threads();
};

// Which ReLUs a convolution absorbs (Layer::Absorb): one without slope, on the oneDNN engine only (the CAFFE
// engine's passes and a double net's have no post-op), and one only; its forward only (the ReLU keeps its
// backward), so the convolution's backward reads no output either way.
TEST_F(OneDnnTest, ConvolutionAbsorbsOneReluWithoutSlopeOnOneDnn) {
  const ConvCase c{1, 2, 5, 5, 2, 1, 3, 3, 1, 1, 0, 0, 1, 1, true};
  Blob<float> x({1, 2, 5, 5}), y;
  Blob<double> xd({1, 2, 5, 5}), yd;
  LayerParameter relu_param = FromText("name: 'r' type: 'ReLU'");
  LayerParameter leaky_param = FromText("name: 'r' type: 'ReLU' relu_param { negative_slope: 0.1 }");
  ReLULayer<float> relu(relu_param), another(relu_param), leaky(leaky_param);
  ReLULayer<double> relu_double(relu_param);
  ConvolutionLayer<float> onednn(ConvParam(c, ConvolutionParameter::ONEDNN)),
      caffe(ConvParam(c, ConvolutionParameter::CAFFE)), onednn2(ConvParam(c, ConvolutionParameter::ONEDNN));
  ConvolutionLayer<double> in_double(ConvParam(c, ConvolutionParameter::DEFAULT));
  for (ConvolutionLayer<float>* l : {&onednn, &caffe, &onednn2}) l->SetUp({&x}, {&y});
  in_double.SetUp({&xd}, {&yd});
  EXPECT_FALSE(onednn.Absorb(leaky));
  EXPECT_TRUE(onednn.Absorb(relu));
  EXPECT_FALSE(onednn.Absorb(another));
  EXPECT_FALSE(caffe.Absorb(relu));
  EXPECT_FALSE(in_double.Absorb(relu_double));
  EXPECT_FALSE(onednn.AbsorbsBackward());
  EXPECT_FALSE(onednn.BackwardNeedsTopData());
  EXPECT_FALSE(onednn2.BackwardNeedsTopData());
}

TEST_F(OneDnnTest, ConvolutionFollowsShapeChangesAndSeveralBottoms) {
  // One layer reshaped to a new batch and image size and back: the primitives follow the shape.
  const ConvCase a{2, 4, 9, 11, 6, 2, 3, 3, 2, 1, 1, 1, 1, 1, true};
  ConvCase b = a;
  b.num = 3;
  b.height = 13;
  ConvolutionLayer<float> layer(ConvParam(a, ConvolutionParameter::ONEDNN));
  for (const ConvCase& c : {a, b, a}) {
    const ConvRun got = RunConv(c, ConvolutionParameter::ONEDNN, 9, &layer);
    const ConvRun ref = RunConv(c, ConvolutionParameter::CAFFE, 9);
    ExpectClose(got.top, ref.top, "top", c);
    ExpectClose(got.bottom_diff, ref.bottom_diff, "bottom diff", c);
    ExpectClose(got.weight_diff, ref.weight_diff, "weight diff", c);
  }

  // Two bottoms through the same weights: each top matches, and the parameter gradients are the sums.
  std::mt19937 rng(3);
  Blob<float> x0({2, 4, 9, 11}), x1({2, 4, 9, 11}), y0, y1, r0, r1;
  Fill(&x0, &rng);
  Fill(&x1, &rng);
  LayerParameter two = ConvParam(a, ConvolutionParameter::ONEDNN);
  ConvolutionLayer<float> onednn(two);
  two.mutable_convolution_param()->set_engine(ConvolutionParameter::CAFFE);
  ConvolutionLayer<float> caffe(two);
  onednn.SetUp({&x0, &x1}, {&y0, &y1});
  caffe.SetUp({&x0, &x1}, {&r0, &r1});
  for (size_t i = 0; i < onednn.blobs().size(); ++i) {
    caffe.blobs()[i]->CopyFrom(*onednn.blobs()[i]);
    cpu_set(onednn.blobs()[i]->count(), 0.f, onednn.blobs()[i]->mutable_cpu_diff());
    cpu_set(caffe.blobs()[i]->count(), 0.f, caffe.blobs()[i]->mutable_cpu_diff());
  }
  onednn.Forward({&x0, &x1}, {&y0, &y1});
  caffe.Forward({&x0, &x1}, {&r0, &r1});
  EXPECT_LE(RelativeError(y0.cpu_data(), r0.cpu_data(), y0.count()), kRelTol);
  EXPECT_LE(RelativeError(y1.cpu_data(), r1.cpu_data(), y1.count()), kRelTol);
  Fill(&y0, &rng, true);
  Fill(&y1, &rng, true);
  r0.CopyFrom(y0, true);
  r1.CopyFrom(y1, true);
  onednn.Backward({&y0, &y1}, {true, false}, {&x0, &x1});
  std::vector<float> dx0(x0.cpu_diff(), x0.cpu_diff() + x0.count());
  caffe.Backward({&r0, &r1}, {true, false}, {&x0, &x1});
  EXPECT_LE(RelativeError(dx0.data(), x0.cpu_diff(), x0.count()), kRelTol);
  for (size_t i = 0; i < onednn.blobs().size(); ++i) {
    EXPECT_LE(RelativeError(onednn.blobs()[i]->cpu_diff(), caffe.blobs()[i]->cpu_diff(), caffe.blobs()[i]->count()),
              kRelTol)
        << "parameter " << i;
  }
}

TEST_F(OneDnnTest, ConvolutionRepeatsItsBitsForAGivenThreadCount) {
  // oneDNN splits work by the thread count and reduces in a fixed order: the same count gives the same bits.
  const ConvCase c{4, 16, 20, 20, 24, 1, 3, 3, 1, 1, 1, 1, 1, 1, true};
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    const ConvRun first = RunConv(c, ConvolutionParameter::ONEDNN, 17);
    for (int run = 0; run < 2; ++run) {
      const ConvRun again = RunConv(c, ConvolutionParameter::ONEDNN, 17);
      EXPECT_TRUE(SameBits(again.top, first.top)) << threads << " threads";
      EXPECT_TRUE(SameBits(again.bottom_diff, first.bottom_diff)) << threads << " threads";
      EXPECT_TRUE(SameBits(again.weight_diff, first.weight_diff)) << threads << " threads";
      EXPECT_TRUE(SameBits(again.bias_diff, first.bias_diff)) << threads << " threads";
    }
  }
}

// precision: BF16 rounds the input, the weights and the output gradient to bfloat16 and sums in float: the
// result is the float convolution of the rounded operands (CAFFE engine), within float's summation-order bound.
// On a CPU without oneDNN's bfloat16 kernels the layer computes in float: then it is the float convolution.
// The small random shapes mostly compute in float (oneDNN would run their bfloat16 passes in its GEMM-based
// fallback, slower than float: onednn_convolution.cpp), so the same windows with 16 to 48 channels per group join
// them (`to_widen`), where its bfloat16 kernels run. Returns how many cases computed in bfloat16 and how many of
// those moved away from the unrounded result by more than float's rounding.
std::pair<int, int> CheckBf16AgainstRoundedFloat(std::vector<ConvCase> cases,
                                                const std::vector<ConvCase>& to_widen) {
  int rounded_differs = 0, bf16_cases = 0;
  for (ConvCase c : to_widen) {
    c.channels = c.group * kChannelBlock16 * (1 + (c.channels / c.group) % 3);
    c.num_output = c.group * kChannelBlock16 * (1 + (c.num_output / c.group) % 3);
    cases.push_back(c);
  }
  for (const ConvCase& c : cases) {
    // DEFAULT: bfloat16 takes oneDNN whatever DEFAULT means for float convolutions.
    const ConvRun got = RunConv(c, ConvolutionParameter::DEFAULT, 5, nullptr, BF16);
    const ConvRun ref = RunConv(c, ConvolutionParameter::CAFFE, 5, nullptr, FP32, got.bf16);
    ExpectClose(got.top, ref.top, "top", c);
    ExpectClose(got.bottom_diff, ref.bottom_diff, "bottom diff", c);
    ExpectClose(got.weight_diff, ref.weight_diff, "weight diff", c);
    ExpectClose(got.bias_diff, ref.bias_diff, "bias diff", c);
    if (!got.bf16) continue;
    ++bf16_cases;
    // The rounding is real: against the unrounded operands the outputs move by bfloat16's precision (2^-9
    // relative per operand), far beyond float's, yet stay within 2e-2 of the blob's largest value.
    const ConvRun exact = RunConv(c, ConvolutionParameter::CAFFE, 5);
    const double top_error = RelativeError(got.top.data(), exact.top.data(), static_cast<int>(exact.top.size()));
    rounded_differs += top_error > 10 * kRelTol;
    EXPECT_LE(top_error, 2e-2) << c;
    EXPECT_LE(RelativeError(got.weight_diff.data(), exact.weight_diff.data(),
                            static_cast<int>(exact.weight_diff.size())),
              2e-2)
        << c;
  }
  return {bf16_cases, rounded_differs};
}

TEST_F(OneDnnTest, Bf16ConvolutionIsTheFloatOneOnRoundedOperands) {
  int rounded_differs = 0, bf16_cases = 0;
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    const auto counts =
        CheckBf16AgainstRoundedFloat(RandomConvCases(16, 40 + threads), RandomConvCases(8, 60 + threads));
    bf16_cases += counts.first;
    rounded_differs += counts.second;
  }
  if (onednn_has_bf16()) {
    EXPECT_GT(bf16_cases, 16) << "precision BF16 computed in float almost everywhere";
    EXPECT_GT(rounded_differs, 16) << "precision BF16 changed almost nothing: is it computing in float?";
  }
}

TEST_F(OneDnnTest, Bf16DeconvolutionIsTheFloatOneOnRoundedOperands) {
  set_compute_threads(2);
  const auto counts = CheckBf16AgainstRoundedFloat(RandomDeconvCases(12, 90), RandomDeconvCases(8, 91));
  if (onednn_has_bf16()) {
    EXPECT_GT(counts.first, 3) << "precision BF16 computed in float almost everywhere";
    EXPECT_GT(counts.second, 3) << "precision BF16 changed almost nothing: is it computing in float?";
  }
}

TEST_F(OneDnnTest, Bf16ConvolutionRepeatsItsBits) {
  const ConvCase c{4, 16, 20, 20, 24, 1, 3, 3, 1, 1, 1, 1, 1, 1, true};
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    const ConvRun first = RunConv(c, ConvolutionParameter::ONEDNN, 17, nullptr, BF16);
    EXPECT_EQ(first.bf16, onednn_has_bf16());
    const ConvRun again = RunConv(c, ConvolutionParameter::ONEDNN, 17, nullptr, BF16);
    EXPECT_TRUE(SameBits(again.top, first.top)) << threads << " threads";
    EXPECT_TRUE(SameBits(again.bottom_diff, first.bottom_diff)) << threads << " threads";
    EXPECT_TRUE(SameBits(again.weight_diff, first.weight_diff)) << threads << " threads";
  }
}

TEST_F(OneDnnTest, EngineChoice) {
  const ConvCase c{1, 2, 5, 5, 2, 1, 3, 3, 1, 1, 0, 0, 1, 1, true};
  Blob<float> x({1, 2, 5, 5}), y;
  Blob<double> xd({1, 2, 5, 5}), yd;
  ConvolutionLayer<float> caffe(ConvParam(c, ConvolutionParameter::CAFFE));
  caffe.SetUp({&x}, {&y});
  EXPECT_FALSE(caffe.uses_onednn());
  ConvolutionLayer<float> cudnn(ConvParam(c, ConvolutionParameter::CUDNN));  // a GPU engine: CAFFE on the CPU
  cudnn.SetUp({&x}, {&y});
  EXPECT_FALSE(cudnn.uses_onednn());
  ConvolutionLayer<float> onednn(ConvParam(c, ConvolutionParameter::ONEDNN));
  onednn.SetUp({&x}, {&y});
  EXPECT_TRUE(onednn.uses_onednn());
  ConvolutionLayer<float> fallback(ConvParam(c, ConvolutionParameter::DEFAULT));
  fallback.SetUp({&x}, {&y});
  EXPECT_EQ(fallback.uses_onednn(), onednn_by_default("Convolution"));
  ConvolutionLayer<double> in_double(ConvParam(c, ConvolutionParameter::DEFAULT));
  in_double.SetUp({&xd}, {&yd});
  EXPECT_FALSE(in_double.uses_onednn());

  // Asking for what cannot be: oneDNN in double, oneDNN for a layer that has no oneDNN engine.
  ConvolutionLayer<double> onednn_double(ConvParam(c, ConvolutionParameter::ONEDNN));
  try {
    onednn_double.SetUp({&xd}, {&yd});
    ADD_FAILURE() << "engine ONEDNN in double was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float only"), std::string::npos) << e.what();
  }
  LayerParameter im2col = ConvParam(c, ConvolutionParameter::ONEDNN);
  im2col.set_type("Im2col");
  auto layer = LayerRegistry<float>::CreateLayer(im2col);
  try {
    layer->SetUp({&x}, {&y});
    ADD_FAILURE() << "Im2col accepted engine ONEDNN";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Convolution and Deconvolution only"), std::string::npos) << e.what();
  }

  // What device_query reports.
  EXPECT_FALSE(onednn_cpu_isa().empty());
  EXPECT_FALSE(onednn_version().empty());
  bool listed = false;
  for (const CpuEngineChoice& choice : cpu_engine_choices()) listed |= std::string(choice.layer_type) == "Convolution";
  EXPECT_TRUE(listed);
}

// ---- Pooling ----

struct PoolCase {
  int num, channels, height, width, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  PoolingParameter::PoolMethod pool;
  bool global, floor;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) {
  return os << (c.pool == PoolingParameter::MAX ? "MAX" : "AVE") << " N" << c.num << " C" << c.channels << " "
            << c.height << "x" << c.width << " k" << c.kernel_h << "x" << c.kernel_w << " s" << c.stride_h << "x"
            << c.stride_w << " p" << c.pad_h << "x" << c.pad_w << (c.global ? " global" : "")
            << (c.floor ? " floor" : " ceil");
}

LayerParameter PoolParam(const PoolCase& c, PoolingParameter::Engine engine) {
  LayerParameter p;
  p.set_name("pool");
  p.set_type("Pooling");
  PoolingParameter* pp = p.mutable_pooling_param();
  pp->set_pool(c.pool);
  if (c.global) {
    pp->set_global_pooling(true);
  } else {
    pp->set_kernel_h(c.kernel_h);
    pp->set_kernel_w(c.kernel_w);
    pp->set_stride_h(c.stride_h);
    pp->set_stride_w(c.stride_w);
    pp->set_pad_h(c.pad_h);
    pp->set_pad_w(c.pad_w);
  }
  if (c.floor) pp->set_round_mode(PoolingParameter::FLOOR);
  pp->set_engine(engine);
  return p;
}

std::vector<PoolCase> RandomPoolCases(int count, unsigned seed) {
  Picker pick{std::mt19937(seed)};
  std::vector<PoolCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    PoolCase c{};
    c.pool = pick(0, 1) ? PoolingParameter::MAX : PoolingParameter::AVE;
    c.num = pick(1, 4);
    c.channels = pick(1, 20);
    c.kernel_h = pick(1, 4);
    c.kernel_w = pick(1, 4);
    c.stride_h = pick(1, 3);
    c.stride_w = pick(1, 3);
    c.pad_h = pick(0, c.kernel_h - 1);
    c.pad_w = pick(0, c.kernel_w - 1);
    c.height = pick(c.kernel_h, 19);
    c.width = pick(c.kernel_w, 19);
    c.global = pick(0, 7) == 0;
    c.floor = pick(0, 3) == 0;
    if (c.global) c.pad_h = c.pad_w = 0, c.stride_h = c.stride_w = 1;
    cases.push_back(c);
  }
  // The models' own: AlexNet's and GoogLeNet's 3x3 stride 2 MAX, GoogLeNet's 3x3 stride 1 pad 1 MAX and its 7x7 AVE,
  // CIFAR-10 quick's 3x3 stride 2 AVE.
  cases.push_back({2, 64, 27, 27, 3, 3, 2, 2, 0, 0, PoolingParameter::MAX, false, false});
  cases.push_back({2, 32, 14, 14, 3, 3, 1, 1, 1, 1, PoolingParameter::MAX, false, false});
  cases.push_back({2, 32, 7, 7, 7, 7, 1, 1, 0, 0, PoolingParameter::AVE, false, false});
  cases.push_back({2, 32, 16, 16, 3, 3, 2, 2, 0, 0, PoolingParameter::AVE, false, false});
  return cases;
}

struct PoolRun {
  std::vector<float> top, bottom_diff;
};

PoolRun RunPool(const PoolCase& c, PoolingLayer<float>* layer, unsigned seed) {
  std::mt19937 rng(seed);
  Blob<float> x({c.num, c.channels, c.height, c.width}), y;
  Fill(&x, &rng);
  layer->SetUp({&x}, {&y});
  layer->Forward({&x}, {&y});
  Fill(&y, &rng, true);
  cpu_set(x.count(), 7.f, x.mutable_cpu_diff());  // overwritten by backward
  layer->Backward({&y}, {true}, {&x});
  return {std::vector<float>(y.cpu_data(), y.cpu_data() + y.count()),
          std::vector<float>(x.cpu_diff(), x.cpu_diff() + x.count())};
}

TEST_F(OneDnnTest, PoolingMatchesCaffeEngineWhereItAcceptsTheWindow) {
  int accepted = 0, refused = 0;
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    for (const PoolCase& c : RandomPoolCases(40, 40 + threads)) {
      PoolingLayer<float> caffe(PoolParam(c, PoolingParameter::CAFFE));
      const PoolRun ref = RunPool(c, &caffe, 3);
      PoolingLayer<float> onednn(PoolParam(c, PoolingParameter::ONEDNN));
      try {
        const PoolRun got = RunPool(c, &onednn, 3);
        ASSERT_TRUE(onednn.uses_onednn()) << c;
        ++accepted;
        // Max and mean of the same values: equal up to the mean's rounding.
        ASSERT_EQ(got.top.size(), ref.top.size()) << c;
        EXPECT_LE(RelativeError(got.top.data(), ref.top.data(), static_cast<int>(ref.top.size())), kRelTol) << c;
        EXPECT_LE(RelativeError(got.bottom_diff.data(), ref.bottom_diff.data(),
                                static_cast<int>(ref.bottom_diff.size())),
                  kRelTol)
            << c;
      } catch (const Error& e) {
        // Refused only for windows where oneDNN's result would not be Caffe's; DEFAULT then runs the CAFFE loops.
        EXPECT_NE(std::string(e.what()).find("engine ONEDNN"), std::string::npos) << c << ": " << e.what();
        ++refused;
        PoolingLayer<float> fallback(PoolParam(c, PoolingParameter::DEFAULT));
        const PoolRun got = RunPool(c, &fallback, 3);
        EXPECT_FALSE(fallback.uses_onednn()) << c;
        EXPECT_TRUE(got.top == ref.top) << c;
      }
    }
  }
  // Most windows are oneDNN's: only an AVE window past the padding or a window wholly in it is refused.
  EXPECT_GT(accepted, 3 * refused) << accepted << " accepted, " << refused << " refused";
}

TEST_F(OneDnnTest, PoolingGradientCheckAndRepeatsItsBits) {
  // AVE is linear, so finite differences in float are exact but for rounding; MAX is covered against CAFFE above.
  const PoolCase ave{2, 3, 7, 6, 3, 2, 2, 1, 1, 1, PoolingParameter::AVE, false, false};
  std::mt19937 rng(5);
  Blob<float> x({2, 3, 7, 6}), y;
  Fill(&x, &rng);
  PoolingLayer<float> layer(PoolParam(ave, PoolingParameter::ONEDNN));
  GradientChecker<float> checker(1e-2f, 1e-2f);
  checker.CheckGradient(&layer, {&x}, {&y});
  EXPECT_TRUE(layer.uses_onednn());

  for (PoolingParameter::PoolMethod method : {PoolingParameter::MAX, PoolingParameter::AVE}) {
    // MAX with padding; AVE without (with padding, the ceil-rounded last window of 28 would reach past it).
    const int pad = method == PoolingParameter::MAX ? 1 : 0;
    const PoolCase c{4, 16, 28, 28, 3, 3, 2, 2, pad, pad, method, false, false};
    for (int threads : {1, 2}) {
      set_compute_threads(threads);
      PoolingLayer<float> a(PoolParam(c, PoolingParameter::ONEDNN)), b(PoolParam(c, PoolingParameter::ONEDNN));
      const PoolRun first = RunPool(c, &a, 8), again = RunPool(c, &b, 8);
      EXPECT_TRUE(SameBits(first.top, again.top)) << c;
      EXPECT_TRUE(SameBits(first.bottom_diff, again.bottom_diff)) << c;
    }
  }
}

TEST_F(OneDnnTest, PoolingRefusesWhatOneDnnCannotDo) {
  const PoolCase c{1, 2, 6, 6, 2, 2, 2, 2, 0, 0, PoolingParameter::MAX, false, false};
  Blob<float> x({1, 2, 6, 6}), y, mask;
  // The argmax as a second top, STOCHASTIC, double: errors with ONEDNN, the CAFFE loops with DEFAULT.
  PoolingLayer<float> with_mask(PoolParam(c, PoolingParameter::ONEDNN));
  EXPECT_THROW(with_mask.SetUp({&x}, {&y, &mask}), Error);
  PoolingLayer<float> default_mask(PoolParam(c, PoolingParameter::DEFAULT));
  default_mask.SetUp({&x}, {&y, &mask});
  EXPECT_FALSE(default_mask.uses_onednn());
  PoolCase s = c;
  s.pool = PoolingParameter::STOCHASTIC;
  PoolingLayer<float> stochastic(PoolParam(s, PoolingParameter::ONEDNN));
  EXPECT_THROW(stochastic.SetUp({&x}, {&y}), Error);
  Blob<double> xd({1, 2, 6, 6}), yd;
  PoolingLayer<double> in_double(PoolParam(c, PoolingParameter::ONEDNN));
  EXPECT_THROW(in_double.SetUp({&xd}, {&yd}), Error);
  // An AVE window reaching past the padding: Caffe's divisor is oneDNN's neither way.
  const PoolCase past{1, 2, 6, 6, 3, 3, 2, 2, 1, 1, PoolingParameter::AVE, false, false};
  PoolingLayer<float> refused(PoolParam(past, PoolingParameter::ONEDNN));
  try {
    refused.SetUp({&x}, {&y});
    ADD_FAILURE() << "accepted " << past;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("divisor"), std::string::npos) << e.what();
  }
}

// ---- Layers with one bottom and one top: InnerProduct, LRN ----

// One forward and two backwards (RunPasses) of a layer on an input of `shape`, its input, parameters and top
// gradient drawn from `seed`: the parameter gradients must hold 0.25 plus twice the gradient.
struct LayerRun {
  std::vector<float> top, bottom_diff;
  std::vector<std::vector<float>> param_diffs;
};

// `round_to_bf16` rounds the input, the weights and the top gradient to bfloat16 (the float reference of a BF16
// layer).
LayerRun RunLayer(Layer<float>* layer, const std::vector<int>& shape, unsigned seed, bool round_to_bf16 = false) {
  std::mt19937 rng(seed);
  Blob<float> x(shape), y;
  Fill(&x, &rng);
  if (round_to_bf16) RoundToBf16(x.mutable_cpu_data(), x.count());
  layer->SetUp({&x}, {&y});
  RunPasses(layer, &x, &y, &rng, 2, round_to_bf16);
  auto values = [](const float* p, int n) { return std::vector<float>(p, p + n); };
  LayerRun r{values(y.cpu_data(), y.count()), values(x.cpu_diff(), x.count()), {}};
  for (auto& b : layer->blobs()) r.param_diffs.push_back(values(b->cpu_diff(), b->count()));
  return r;
}

void ExpectRunsClose(const LayerRun& got, const LayerRun& want, const std::string& what) {
  auto close = [&](const std::vector<float>& a, const std::vector<float>& b, const std::string& blob) {
    ASSERT_EQ(a.size(), b.size()) << blob << ", " << what;
    EXPECT_LE(RelativeError(a.data(), b.data(), static_cast<int>(a.size())), kRelTol) << blob << ", " << what;
  };
  close(got.top, want.top, "top");
  close(got.bottom_diff, want.bottom_diff, "bottom diff");
  ASSERT_EQ(got.param_diffs.size(), want.param_diffs.size()) << what;
  for (size_t i = 0; i < got.param_diffs.size(); ++i) {
    close(got.param_diffs[i], want.param_diffs[i], "parameter diff " + std::to_string(i));
  }
}

bool SameBits(const LayerRun& a, const LayerRun& b) {
  bool same = SameBits(a.top, b.top) && SameBits(a.bottom_diff, b.bottom_diff);
  for (size_t i = 0; same && i < a.param_diffs.size(); ++i) same = SameBits(a.param_diffs[i], b.param_diffs[i]);
  return same && a.param_diffs.size() == b.param_diffs.size();
}

std::string ShapeString(const std::vector<int>& shape) {
  std::ostringstream s;
  for (int d : shape) s << d << " ";
  return s.str();
}

// The ONEDNN engine against CAFFE on every case, on 1 and 2 threads (the cases drawn anew for each).
template <template <typename> class LayerT, typename Case, typename MakeCases, typename MakeParam>
void ExpectOneDnnMatchesCaffe(const MakeCases& cases, const MakeParam& param) {
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    for (const Case& c : cases(threads)) {
      LayerT<float> caffe(param(c, "CAFFE")), onednn(param(c, "ONEDNN"));
      const LayerRun ref = RunLayer(&caffe, c.shape(), 7), got = RunLayer(&onednn, c.shape(), 7);
      ASSERT_TRUE(onednn.uses_onednn());
      std::ostringstream what;
      what << c << ", " << threads << " threads";
      ExpectRunsClose(got, ref, what.str());
    }
  }
}

// Finite differences of the ONEDNN engine's own forward, in float (oneDNN has no double): a step of 1e-2 and a
// tolerance of 1e-2, as Caffe's float checks use.
template <template <typename> class LayerT, typename Case, typename MakeParam>
void ExpectOneDnnGradient(const Case& c, const MakeParam& param) {
  std::mt19937 rng(12);
  Blob<float> x(c.shape()), y;
  Fill(&x, &rng);
  LayerT<float> layer(param(c, "ONEDNN"));
  GradientChecker<float> checker(1e-2f, 1e-2f);
  checker.CheckGradient(&layer, {&x}, {&y});
  EXPECT_TRUE(layer.uses_onednn()) << c;
}

// The same bits from two layers of the ONEDNN engine, on 1 and 2 threads.
template <template <typename> class LayerT, typename Case, typename MakeParam>
void ExpectOneDnnRepeatsItsBits(const Case& c, const MakeParam& param) {
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    LayerT<float> a(param(c, "ONEDNN")), b(param(c, "ONEDNN"));
    EXPECT_TRUE(SameBits(RunLayer(&a, c.shape(), 21), RunLayer(&b, c.shape(), 21))) << c << ", " << threads
                                                                                      << " threads";
  }
}

// CAFFE and CUDNN (where the layer has it) run Strata's own path, DEFAULT follows the table, ONEDNN oneDNN;
// in double DEFAULT is Strata's own path and ONEDNN an error that says why.
template <template <typename> class LayerT, typename MakeParam>
void ExpectEngineChoice(const MakeParam& param, const std::vector<int>& shape, const std::string& type,
                        const std::vector<std::string>& engines) {
  Blob<float> x(shape), y;
  for (const std::string& engine : engines) {
    LayerT<float> layer(param(engine));
    layer.SetUp({&x}, {&y});
    EXPECT_EQ(layer.uses_onednn(), engine == "ONEDNN" || (engine == "DEFAULT" && onednn_by_default(type)))
        << type << ", engine " << engine;
  }
  Blob<double> xd(shape), yd;
  LayerT<double> in_double(param("DEFAULT"));
  in_double.SetUp({&xd}, {&yd});
  EXPECT_FALSE(in_double.uses_onednn()) << type;
  LayerT<double> onednn_double(param("ONEDNN"));
  try {
    onednn_double.SetUp({&xd}, {&yd});
    ADD_FAILURE() << type << ": engine ONEDNN in double was accepted";
  } catch (const Error& e) {
    const std::string want = type + " layer '" + param("ONEDNN").name() + "': engine ONEDNN computes in float only";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

struct IpCase {
  std::vector<int> input;
  int axis, num_output;
  bool transpose, bias;
  const std::vector<int>& shape() const { return input; }
};

std::ostream& operator<<(std::ostream& os, const IpCase& c) {
  return os << "input " << ShapeString(c.input) << "axis " << c.axis << " N" << c.num_output
            << (c.transpose ? " transposed" : "") << (c.bias ? " bias" : " no bias");
}

LayerParameter IpParam(const IpCase& c, const std::string& engine) {
  std::ostringstream s;
  s << std::boolalpha << "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: " << c.num_output
    << " axis: " << c.axis << " transpose: " << c.transpose << " bias_term: " << c.bias
    << " weight_filler { type: 'gaussian' } engine: " << engine << " }";
  return FromText(s.str());
}

// `count` cases, each drawn by `draw` from one stream seeded with `seed`, then `fixed` ones.
template <typename Case, typename Draw>
std::vector<Case> DrawCases(int count, unsigned seed, const Draw& draw, const std::vector<Case>& fixed) {
  Picker pick{std::mt19937(seed)};
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) cases.push_back(draw(pick));
  cases.insert(cases.end(), fixed.begin(), fixed.end());
  return cases;
}

// Random shapes of 2 to 4 axes flattened at any axis (negative ones too), both weight layouts, with and without
// bias; then the models' own: LeNet's ip1 and ip2, AlexNet's fc8, CIFAR-10 quick's ip1 (its input 64 x 4 x 4).
std::vector<IpCase> RandomIpCases(int count, unsigned seed) {
  auto draw = [](Picker& pick) {
    const int axes = pick(2, 4);
    std::vector<int> shape;
    for (int a = 0; a < axes; ++a) shape.push_back(pick(1, 7));
    const int axis = pick(1, axes - 1) - (pick(0, 3) == 0 ? axes : 0);
    return IpCase{shape, axis, pick(1, 24), pick(0, 1) != 0, pick(0, 3) != 0};
  };
  return DrawCases<IpCase>(count, seed, draw,
                           {{{8, 50, 4, 4}, 1, 500, false, true},
                            {{8, 500}, 1, 10, false, true},
                            {{2, 4096}, 1, 1000, false, true},
                            {{4, 64, 4, 4}, 1, 64, true, true}});
}

TEST_F(OneDnnTest, InnerProductMatchesCaffeEngineOnRandomShapes) {
  ExpectOneDnnMatchesCaffe<InnerProductLayer, IpCase>([](int threads) { return RandomIpCases(30, 60 + threads); },
                                                      IpParam);
}

// precision: BF16 with engine ONEDNN multiplies the rounded input, weights and top gradient and sums in float: the
// float (CAFFE) inner product of the rounded operands, within float's summation-order bound; against the unrounded
// ones its output moves by bfloat16's precision. With DEFAULT the layer stays where float's DEFAULT puts it.
TEST_F(OneDnnTest, Bf16InnerProductIsTheFloatOneOnRoundedOperands) {
  int bf16_cases = 0, rounded_differs = 0;
  for (const IpCase& c : RandomIpCases(20, 70)) {
    LayerParameter by_default = IpParam(c, "DEFAULT");
    by_default.set_precision(BF16);
    InnerProductLayer<float> default_layer(by_default);
    Blob<float> x(c.shape()), y;
    default_layer.SetUp({&x}, {&y});
    EXPECT_EQ(default_layer.uses_onednn(), onednn_by_default("InnerProduct")) << c;
    LayerParameter p = IpParam(c, "ONEDNN");
    p.set_precision(BF16);
    InnerProductLayer<float> bf16(p), caffe(IpParam(c, "CAFFE")), exact(IpParam(c, "CAFFE"));
    const LayerRun got = RunLayer(&bf16, c.shape(), 7);
    ASSERT_TRUE(bf16.uses_onednn()) << c;
    std::ostringstream what;
    what << c;
    ExpectRunsClose(got, RunLayer(&caffe, c.shape(), 7, bf16.ComputesIn16Bit()), what.str());
    if (!bf16.ComputesIn16Bit()) continue;
    ++bf16_cases;
    const LayerRun unrounded = RunLayer(&exact, c.shape(), 7);
    const double error = RelativeError(got.top.data(), unrounded.top.data(), static_cast<int>(got.top.size()));
    rounded_differs += error > 10 * kRelTol;
    EXPECT_LE(error, 2e-2) << c;
  }
  if (onednn_has_bf16()) {
    EXPECT_GT(bf16_cases, 12) << "precision BF16 computed in float almost everywhere";
    EXPECT_GT(rounded_differs, 8) << "precision BF16 changed almost nothing: is it computing in float?";
  }
}

TEST_F(OneDnnTest, InnerProductFollowsShapeChanges) {
  // New batches, then the first again: the primitives follow the shape.
  const IpCase c{{3, 5, 2}, 1, 7, true, true};
  InnerProductLayer<float> onednn(IpParam(c, "ONEDNN")), caffe(IpParam(c, "CAFFE"));
  Blob<float> x(c.input), y, r;
  std::mt19937 rng(4);
  onednn.SetUp({&x}, {&y});
  caffe.SetUp({&x}, {&r});
  for (size_t i = 0; i < onednn.blobs().size(); ++i) caffe.blobs()[i]->CopyFrom(*onednn.blobs()[i]);
  for (int num : {3, 6, 1, 3}) {
    x.Reshape({num, 5, 2});
    Fill(&x, &rng);
    onednn.Reshape({&x}, {&y});
    caffe.Reshape({&x}, {&r});
    onednn.Forward({&x}, {&y});
    caffe.Forward({&x}, {&r});
    ASSERT_EQ(y.shape(), r.shape());
    EXPECT_LE(RelativeError(y.cpu_data(), r.cpu_data(), r.count()), kRelTol) << "batch " << num;
  }
}

TEST_F(OneDnnTest, InnerProductGradientCheckAndRepeatsItsBits) {
  ExpectOneDnnGradient<InnerProductLayer>(IpCase{{2, 3, 2, 2}, 1, 4, false, true}, IpParam);
  ExpectOneDnnGradient<InnerProductLayer>(IpCase{{3, 2, 5}, -1, 4, true, false}, IpParam);
  ExpectOneDnnRepeatsItsBits<InnerProductLayer>(IpCase{{16, 40, 5, 5}, 1, 300, false, true}, IpParam);
}

TEST_F(OneDnnTest, InnerProductEngineChoice) {
  const IpCase c{{2, 6}, 1, 3, false, true};
  ExpectEngineChoice<InnerProductLayer>([&](const std::string& engine) { return IpParam(c, engine); }, c.input,
                                        "InnerProduct", {"CAFFE", "DEFAULT", "ONEDNN"});
}

struct LrnCase {
  int num, channels, height, width, local_size;
  float alpha, beta, k;
  bool across;
  std::vector<int> shape() const { return {num, channels, height, width}; }
};

std::ostream& operator<<(std::ostream& os, const LrnCase& c) {
  return os << (c.across ? "ACROSS" : "WITHIN") << " N" << c.num << " C" << c.channels << " " << c.height << "x"
            << c.width << " n" << c.local_size << " alpha " << c.alpha << " beta " << c.beta << " k " << c.k;
}

LayerParameter LrnParam(const LrnCase& c, const std::string& engine) {
  std::ostringstream s;
  s << "name: 'norm' type: 'LRN' lrn_param { local_size: " << c.local_size << " alpha: " << c.alpha
    << " beta: " << c.beta << " k: " << c.k << " norm_region: " << (c.across ? "ACROSS_CHANNELS" : "WITHIN_CHANNEL")
    << " engine: " << engine << " }";
  return FromText(s.str());
}

// Random windows, alphas large enough that the normalisation matters, the betas with their own CAFFE paths
// (0.75, 0.5, 1) and others, k other than 1 (which WITHIN_CHANNEL must ignore, as Caffe does); then the models':
// AlexNet's norm1 and norm2, GoogLeNet's, CIFAR-10 full's WITHIN_CHANNEL.
std::vector<LrnCase> RandomLrnCases(int count, unsigned seed) {
  auto draw = [](Picker& pick) {
    const float betas[] = {0.75f, 0.5f, 1.f, 0.3f, 1.7f};
    const float ks[] = {1.f, 2.f, 0.5f};
    const int num = pick(1, 3), channels = pick(1, 40), height = pick(1, 13), width = pick(1, 13);
    const int local_size = 2 * pick(0, 3) + 1;
    const float alpha = 0.05f * pick(1, 40), beta = betas[pick(0, 4)], k = ks[pick(0, 2)];
    return LrnCase{num, channels, height, width, local_size, alpha, beta, k, pick(0, 1) != 0};
  };
  return DrawCases<LrnCase>(count, seed, draw,
                            {{2, 96, 27, 27, 5, 1e-4f, 0.75f, 1.f, true},
                             {2, 256, 13, 13, 5, 1e-4f, 0.75f, 1.f, true},
                             {1, 64, 56, 56, 5, 1e-4f, 0.75f, 1.f, true},
                             {2, 32, 8, 8, 3, 5e-5f, 0.75f, 1.f, false}});
}

TEST_F(OneDnnTest, LRNMatchesCaffeEngineOnRandomShapes) {
  ExpectOneDnnMatchesCaffe<LRNLayer, LrnCase>([](int threads) { return RandomLrnCases(30, 80 + threads); },
                                              LrnParam);
}

TEST_F(OneDnnTest, LRNGradientCheckRepeatsItsBitsAndEngineChoice) {
  for (bool across : {true, false}) {
    ExpectOneDnnGradient<LRNLayer>(LrnCase{2, 7, 4, 5, 3, 0.8f, 0.75f, 2.f, across}, LrnParam);
    ExpectOneDnnRepeatsItsBits<LRNLayer>(LrnCase{2, 32, 16, 16, 5, 1e-2f, 0.75f, 1.f, across}, LrnParam);
  }
  const LrnCase c{1, 3, 4, 4, 3, 1.f, 0.75f, 1.f, true};
  ExpectEngineChoice<LRNLayer>([&](const std::string& engine) { return LrnParam(c, engine); }, c.shape(), "LRN",
                               {"CAFFE", "CUDNN", "DEFAULT", "ONEDNN"});
}

// ---- ReLU, Softmax ----

// A blob of `input` through ReLU (negative_slope `slope`) or Softmax (over `axis`).
struct VectorCase {
  std::vector<int> input;
  float slope;
  int axis;
  const std::vector<int>& shape() const { return input; }
};

std::ostream& operator<<(std::ostream& os, const VectorCase& c) {
  return os << "input " << ShapeString(c.input) << "slope " << c.slope << " axis " << c.axis;
}

LayerParameter ReluParam(const VectorCase& c, const std::string& engine) {
  std::ostringstream s;
  s << "name: 'relu' type: 'ReLU' relu_param { negative_slope: " << c.slope << " engine: " << engine << " }";
  return FromText(s.str());
}

LayerParameter SoftmaxParam(const VectorCase& c, const std::string& engine) {
  std::ostringstream s;
  s << "name: 'prob' type: 'Softmax' softmax_param { axis: " << c.axis << " engine: " << engine << " }";
  return FromText(s.str());
}

// Random shapes of 1 to 4 axes, slopes 0, positive and negative, softmax over any axis (negative ones too); then
// the models': AlexNet's relu1 and its loss's softmax (32 x 1000), CIFAR-10's (100 x 10), a per-pixel softmax.
std::vector<VectorCase> RandomVectorCases(int count, unsigned seed) {
  auto draw = [](Picker& pick) {
    const int axes = pick(1, 4);
    std::vector<int> shape;
    for (int a = 0; a < axes; ++a) shape.push_back(pick(1, 9));
    const float slopes[] = {0.f, 0.f, 0.1f, -0.5f};
    const float slope = slopes[pick(0, 3)];
    return VectorCase{shape, slope, pick(0, axes - 1) - (pick(0, 3) == 0 ? axes : 0)};
  };
  return DrawCases<VectorCase>(count, seed, draw,
                               {{{2, 96, 55, 55}, 0.f, 1},
                                {{32, 1000}, 0.f, 1},
                                {{100, 10}, 0.f, 1},
                                {{2, 21, 12, 12}, 0.f, 1}});
}

TEST_F(OneDnnTest, ReLUAndSoftmaxMatchCaffeEngineOnRandomShapes) {
  ExpectOneDnnMatchesCaffe<ReLULayer, VectorCase>([](int threads) { return RandomVectorCases(30, 90 + threads); },
                                                  ReluParam);
  ExpectOneDnnMatchesCaffe<SoftmaxLayer, VectorCase>(
      [](int threads) { return RandomVectorCases(30, 95 + threads); }, SoftmaxParam);
}

TEST_F(OneDnnTest, ReLUAndSoftmaxRunInPlace) {
  // In place (top == bottom), as nets run them: the same values as the CAFFE engine in place.
  for (float slope : {0.f, 0.2f}) {
    const VectorCase c{{3, 4, 5}, slope, 1};
    for (auto param : {ReluParam, SoftmaxParam}) {
      std::vector<std::vector<float>> results;
      for (const char* engine : {"CAFFE", "ONEDNN"}) {
        std::mt19937 rng(6);
        Blob<float> x(c.input);
        Fill(&x, &rng);
        auto layer = LayerRegistry<float>::CreateLayer(param(c, engine));
        layer->SetUp({&x}, {&x});
        layer->Forward({&x}, {&x});
        Fill(&x, &rng, true);
        layer->Backward({&x}, {true}, {&x});
        results.emplace_back(x.cpu_data(), x.cpu_data() + x.count());
        results.back().insert(results.back().end(), x.cpu_diff(), x.cpu_diff() + x.count());
      }
      EXPECT_LE(RelativeError(results[1].data(), results[0].data(), static_cast<int>(results[0].size())), kRelTol)
          << param(c, "ONEDNN").type() << " " << c;
    }
  }
}

TEST_F(OneDnnTest, ReLUAndSoftmaxGradientBitsAndEngineChoice) {
  // ReLU's kink makes finite differences unreliable, and its values are CAFFE's exactly (above).
  ExpectOneDnnGradient<SoftmaxLayer>(VectorCase{{2, 5, 3}, 0.f, 1}, SoftmaxParam);
  for (float slope : {0.f, -0.5f}) {
    ExpectOneDnnRepeatsItsBits<ReLULayer>(VectorCase{{4, 64, 20, 20}, slope, 1}, ReluParam);
  }
  ExpectOneDnnRepeatsItsBits<SoftmaxLayer>(VectorCase{{4, 64, 20, 20}, 0.f, 1}, SoftmaxParam);
  const VectorCase c{{2, 3, 4}, 0.f, 1};
  ExpectEngineChoice<ReLULayer>([&](const std::string& engine) { return ReluParam(c, engine); }, c.input, "ReLU",
                                {"CAFFE", "CUDNN", "DEFAULT", "ONEDNN"});
  ExpectEngineChoice<SoftmaxLayer>([&](const std::string& engine) { return SoftmaxParam(c, engine); }, c.input,
                                   "Softmax", {"CAFFE", "CUDNN", "DEFAULT", "ONEDNN"});
}

TEST_F(OneDnnTest, SoftmaxWithLossFollowsItsSoftmaxEngine) {
  // SoftmaxWithLoss's inner softmax (its forward: the loss computes its own gradient) takes softmax_param.engine:
  // the loss and its gradient match CAFFE's.
  std::vector<std::vector<float>> results;
  for (const char* engine : {"CAFFE", "ONEDNN"}) {
    std::mt19937 rng(8);
    Blob<float> x({6, 5, 2}), labels({6, 2}), loss;
    Fill(&x, &rng);
    for (int i = 0; i < labels.count(); ++i) labels.mutable_cpu_data()[i] = static_cast<float>(i % 5);
    auto layer = LayerRegistry<float>::CreateLayer(
        FromText(std::string("name: 'loss' type: 'SoftmaxWithLoss' softmax_param { engine: ") + engine + " }"));
    layer->SetUp({&x, &labels}, {&loss});
    layer->Forward({&x, &labels}, {&loss});
    loss.mutable_cpu_diff()[0] = 1.f;
    layer->Backward({&loss}, {true, false}, {&x, &labels});
    results.emplace_back(x.cpu_diff(), x.cpu_diff() + x.count());
    results.back().push_back(loss.cpu_data()[0]);
  }
  EXPECT_LE(RelativeError(results[1].data(), results[0].data(), static_cast<int>(results[0].size())), kRelTol);
}

TEST(OneDnnTool, DeviceQueryReportsTheCpuIsaAndEngines) {
  const std::string bin = std::string(STRATA_BINARY_DIR) + "/bin/strata";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "the strata tool is not built";
  const std::string log = (std::filesystem::temp_directory_path() / "strata_device_query_test.log").string();
  // With a GPU the query goes on to describe it; without one it succeeds all the same.
  const int status = std::system((bin + " device_query > " + log + " 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::string out = text.str();
  EXPECT_NE(out.find("CPU: oneDNN " + onednn_version() + ", kernels for " + onednn_cpu_isa()), std::string::npos)
      << out;
  for (const CpuEngineChoice& c : cpu_engine_choices()) {
    EXPECT_NE(out.find(std::string("  ") + c.layer_type + " "), std::string::npos) << c.layer_type << ": " << out;
  }
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace strata
