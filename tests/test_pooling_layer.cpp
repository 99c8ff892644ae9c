#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/pool_order.hpp"
#include "strata/layers/pooling_layer.hpp"
#include "strata/memory_format.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter PoolParam(PoolingParameter::PoolMethod method, int kernel, int stride, int pad) {
  LayerParameter p;
  p.set_name("pool");
  p.set_type("Pooling");
  auto* pp = p.mutable_pooling_param();
  pp->set_pool(method);
  if (kernel > 0) pp->set_kernel_size(kernel);
  pp->set_stride(stride);
  pp->set_pad(pad);
  return p;
}

LayerParameter GlobalParam(PoolingParameter::PoolMethod method) {
  LayerParameter p;
  p.set_type("Pooling");
  p.mutable_pooling_param()->set_pool(method);
  p.mutable_pooling_param()->set_global_pooling(true);
  return p;
}

// Distinct values 0.1 apart in a random order, so no max window has a tie that a finite difference could flip.
void FillDistinct(Blob<double>* blob, unsigned seed = 5) {
  std::vector<int> order(blob->count());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = 0.1 * (order[i] - blob->count() / 2);
}

std::vector<int> TopShape(const LayerParameter& p, const std::vector<int>& in) {
  Blob<float> x(in), y;
  PoolingLayer<float> layer(p);
  layer.SetUp({&x}, {&y});
  return y.shape();
}

TEST(PoolingLayer, OutputShapeFollowsCaffe) {
  using P = PoolingParameter;
  EXPECT_EQ(TopShape(PoolParam(P::MAX, 3, 2, 0), {2, 3, 7, 6}), (std::vector<int>{2, 3, 3, 3}));  // ceil(3/2)+1
  LayerParameter floor = PoolParam(P::MAX, 3, 2, 0);
  floor.mutable_pooling_param()->set_round_mode(P::FLOOR);
  EXPECT_EQ(TopShape(floor, {2, 3, 7, 6}), (std::vector<int>{2, 3, 3, 2}));  // floor(3/2)+1
  EXPECT_EQ(TopShape(PoolParam(P::AVE, 3, 2, 1), {1, 1, 6, 6}), (std::vector<int>{1, 1, 4, 4}));  // ceil(5/2)+1
  // ceil(5/2)+1 = 4, but the 4th window would start at 6 - 1 = 5, in the padding: dropped.
  EXPECT_EQ(TopShape(PoolParam(P::MAX, 2, 2, 1), {1, 1, 5, 5}), (std::vector<int>{1, 1, 3, 3}));
  EXPECT_EQ(TopShape(GlobalParam(P::AVE), {2, 4, 5, 3}), (std::vector<int>{2, 4, 1, 1}));
  LayerParameter rect = PoolParam(P::MAX, 0, 1, 0);
  rect.mutable_pooling_param()->set_kernel_h(2);
  rect.mutable_pooling_param()->set_kernel_w(3);
  EXPECT_EQ(TopShape(rect, {1, 1, 4, 4}), (std::vector<int>{1, 1, 3, 2}));
}

TEST(PoolingLayer, HandWorkedMaxWithMaskTop) {
  Blob<double> x({1, 1, 4, 4}), y, mask;
  const double v[] = {1, 5, 2, 0, 3, 4, 8, 6, 9, 7, 10, 11, 12, 15, 14, 13};
  std::copy(v, v + 16, x.mutable_cpu_data());
  PoolingLayer<double> layer(PoolParam(PoolingParameter::MAX, 2, 2, 0));
  layer.SetUp({&x}, {&y, &mask});
  layer.Forward({&x}, {&y, &mask});
  const double want[] = {5, 8, 15, 14}, want_idx[] = {1, 6, 13, 14};
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(y.cpu_data()[i], want[i]);
    EXPECT_DOUBLE_EQ(mask.cpu_data()[i], want_idx[i]);
  }
  // Backward routes each output's gradient to its argmax.
  for (int i = 0; i < 4; ++i) y.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&y, &mask}, {true}, {&x});
  for (int i = 0; i < 16; ++i) {
    const double* at = std::find(want_idx, want_idx + 4, double(i));
    EXPECT_DOUBLE_EQ(x.cpu_diff()[i], at == want_idx + 4 ? 0.0 : double(at - want_idx + 1)) << i;
  }
}

TEST(PoolingLayer, HandWorkedMaxTiesAndPadding) {
  // Caffe keeps the first maximum in row-major order; padding never wins, even against negative values.
  Blob<double> x({1, 1, 2, 2}), y;
  const double v[] = {-3, -1, -1, -2};
  std::copy(v, v + 4, x.mutable_cpu_data());
  PoolingLayer<double> layer(PoolParam(PoolingParameter::MAX, 2, 1, 1));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 3, 3}));
  const double want[] = {-3, -1, -1, -1, -1, -1, -1, -1, -2};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(y.cpu_data()[i], want[i]) << i;
  for (int i = 0; i < 9; ++i) y.mutable_cpu_diff()[i] = 1;
  layer.Backward({&y}, {true}, {&x});
  // The centre window sees all four and picks index 1 (the first -1); index 2 wins only windows without 1.
  EXPECT_DOUBLE_EQ(x.cpu_diff()[0], 1);
  EXPECT_DOUBLE_EQ(x.cpu_diff()[1], 4);  // windows (0,1), (0,2), (1,1), (1,2)
  EXPECT_DOUBLE_EQ(x.cpu_diff()[2], 3);  // windows (1,0), (2,0), (2,1)
  EXPECT_DOUBLE_EQ(x.cpu_diff()[3], 1);  // window (2,2)
}

TEST(PoolingLayer, HandWorkedAverageCeilAndPadding) {
  Blob<double> x({1, 1, 4, 4}), y;
  for (int i = 0; i < 16; ++i) x.mutable_cpu_data()[i] = i + 1;
  // No padding, ceil rounding: the last window overhangs the image and divides by its clipped size.
  PoolingLayer<double> plain(PoolParam(PoolingParameter::AVE, 3, 2, 0));
  plain.SetUp({&x}, {&y});
  plain.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], (1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11) / 9.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], (3 + 4 + 7 + 8 + 11 + 12) / 6.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], (9 + 10 + 11 + 13 + 14 + 15) / 6.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[3], (11 + 12 + 15 + 16) / 4.0);
  // Pad 1: windows start at -1, 1, 3; the divisor counts padding up to H + pad = 5, so the last window (rows
  // 3..5) counts rows 3 and 4: 2 x 2 for the corner, which holds only pixel 16.
  PoolingLayer<double> padded(PoolParam(PoolingParameter::AVE, 3, 2, 1));
  padded.SetUp({&x}, {&y});
  padded.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 3, 3}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], (1 + 2 + 5 + 6) / 9.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], (4 + 8) / 6.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[4], (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[8], 16 / 4.0);
  // Backward: each pixel gets dy / divisor from every window holding it.
  for (int i = 0; i < 9; ++i) y.mutable_cpu_diff()[i] = 36;
  padded.Backward({&y}, {true}, {&x});
  EXPECT_DOUBLE_EQ(x.cpu_diff()[0], 36 / 9.0);                    // window (0,0) only
  EXPECT_DOUBLE_EQ(x.cpu_diff()[15], 36 / 9.0 + 2 * 36 / 6.0 + 36 / 4.0);  // (1,1), (1,2), (2,1), (2,2)
}

TEST(PoolingLayer, HandWorkedGlobal) {
  Blob<double> x({1, 2, 2, 3}), y;
  const double v[] = {1, 7, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  std::copy(v, v + 12, x.mutable_cpu_data());
  PoolingLayer<double> ave(GlobalParam(PoolingParameter::AVE));
  ave.SetUp({&x}, {&y});
  ave.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 2, 1, 1}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 26 / 6.0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], -21 / 6.0);
  PoolingLayer<double> max(GlobalParam(PoolingParameter::MAX));
  max.SetUp({&x}, {&y});
  max.Forward({&x}, {&y});
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 7);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], -1);
  y.mutable_cpu_diff()[0] = 2;
  y.mutable_cpu_diff()[1] = 3;
  max.Backward({&y}, {true}, {&x});
  const double want[] = {0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(x.cpu_diff()[i], want[i]) << i;
}

void CheckPoolGradient(const LayerParameter& p, const std::vector<int>& shape, int tops = 1) {
  Blob<double> x(shape), y, mask;
  FillDistinct(&x);
  PoolingLayer<double> layer(p);
  GradientChecker<double> checker(1e-4, 1e-6);
  std::vector<Blob<double>*> top{&y};
  if (tops == 2) top.push_back(&mask);
  checker.CheckGradient(&layer, {&x}, top);
}

TEST(PoolingLayer, GradientMax) {
  using P = PoolingParameter;
  CheckPoolGradient(PoolParam(P::MAX, 3, 2, 0), {2, 2, 6, 7});   // ceil overhang
  CheckPoolGradient(PoolParam(P::MAX, 3, 2, 1), {1, 2, 5, 6});   // padding
  CheckPoolGradient(PoolParam(P::MAX, 2, 1, 1), {1, 2, 3, 4}, 2);  // mask as a second top
  LayerParameter rect = PoolParam(P::MAX, 0, 1, 0);
  auto* pp = rect.mutable_pooling_param();
  pp->clear_stride();
  pp->clear_pad();
  pp->set_kernel_h(3);
  pp->set_kernel_w(2);
  pp->set_stride_h(2);
  pp->set_stride_w(1);
  pp->set_pad_h(1);
  pp->set_pad_w(0);
  pp->set_round_mode(P::FLOOR);
  CheckPoolGradient(rect, {1, 2, 6, 5});
}

TEST(PoolingLayer, GradientAverage) {
  using P = PoolingParameter;
  CheckPoolGradient(PoolParam(P::AVE, 3, 2, 0), {2, 2, 6, 7});
  CheckPoolGradient(PoolParam(P::AVE, 3, 2, 1), {1, 2, 5, 6});
  CheckPoolGradient(PoolParam(P::AVE, 2, 1, 1), {1, 1, 3, 3});
  LayerParameter floor = PoolParam(P::AVE, 3, 3, 1);
  floor.mutable_pooling_param()->set_round_mode(P::FLOOR);
  CheckPoolGradient(floor, {1, 2, 7, 8});
}

TEST(PoolingLayer, GradientGlobal) {
  CheckPoolGradient(GlobalParam(PoolingParameter::MAX), {2, 3, 3, 4});
  CheckPoolGradient(GlobalParam(PoolingParameter::AVE), {2, 3, 3, 4});
}

TEST(PoolingLayer, LargeInputMatchesSmallPlanes) {
  // Enough planes to take the parallel path; each plane must equal the same plane pooled alone.
  Blob<float> x({4, 16, 33, 35}), y, one({1, 1, 33, 35}), y1;
  FillUniform(&x, -1.0f, 1.0f);
  for (auto method : {PoolingParameter::MAX, PoolingParameter::AVE}) {
    PoolingLayer<float> layer(PoolParam(method, 3, 2, 1));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    PoolingLayer<float> single(PoolParam(method, 3, 2, 1));
    single.SetUp({&one}, {&y1});
    for (int c : {0, 17, 63}) {
      std::copy_n(x.cpu_data() + c * 33 * 35, 33 * 35, one.mutable_cpu_data());
      single.Forward({&one}, {&y1});
      for (int i = 0; i < y1.count(); ++i) ASSERT_EQ(y.cpu_data()[c * y1.count() + i], y1.cpu_data()[i]);
    }
  }
}

TEST(PoolingLayer, CaffePrototxt) {
  LayerParameter p;  // AlexNet's pool1
  ReadProtoFromTextString(R"(
    name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
    pooling_param { pool: MAX kernel_size: 3 stride: 2 })", &p);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "Pooling");
  Blob<float> x({1, 96, 55, 55}), y;
  layer->SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{1, 96, 27, 27}));
}

// STOCHASTIC pooling in TRAIN: each window's pick is drawn in proportion to the values, its gradient goes to the
// pick alone, and the same seed gives the same picks.
TEST(PoolingLayer, StochasticTrainPicksInProportion) {
  const int planes = 20000;
  LayerParameter p = PoolParam(PoolingParameter::STOCHASTIC, 2, 2, 0);
  p.set_phase(TRAIN);
  // Every plane is [[1, 0], [3, 0]] plus a column the 2x2 window (stride 2, ceil) sees alone: [[0], [5]].
  Blob<float> x({planes, 1, 2, 3}), y;
  for (int c = 0; c < planes; ++c) {
    const float v[] = {1, 0, 0, 3, 0, 5};
    std::copy(v, v + 6, x.mutable_cpu_data() + 6 * c);
  }
  PoolingLayer<float> layer(p);
  layer.SetUp({&x}, {&y});
  EXPECT_TRUE(layer.IsStochastic());
  ASSERT_EQ(y.shape(), (std::vector<int>{planes, 1, 1, 2}));
  Strata::set_random_seed(9);
  layer.Forward({&x}, {&y});
  int threes = 0;
  for (int c = 0; c < planes; ++c) {
    const float first = y.cpu_data()[2 * c];
    ASSERT_TRUE(first == 1 || first == 3) << "a zero is never picked, got " << first;
    threes += first == 3;
    ASSERT_EQ(y.cpu_data()[2 * c + 1], 5) << "the only non-zero value is always picked";
  }
  EXPECT_NEAR(threes / double(planes), 0.75, 0.015);  // P(3) = 3 / (1 + 3); 0.015 is 5 standard deviations
  // Backward: each output's gradient lands on its pick.
  for (int i = 0; i < y.count(); ++i) y.mutable_cpu_diff()[i] = 1 + i % 7;
  layer.Backward({&y}, {true}, {&x});
  for (int c = 0; c < planes; ++c) {
    const float* dx = x.cpu_diff() + 6 * c;
    const float g0 = 1 + (2 * c) % 7, g1 = 1 + (2 * c + 1) % 7;
    const bool three = y.cpu_data()[2 * c] == 3;
    const float want[] = {three ? 0 : g0, 0, 0, three ? g0 : 0, 0, g1};
    for (int i = 0; i < 6; ++i) ASSERT_EQ(dx[i], want[i]) << "plane " << c << " element " << i;
  }
  // The same seed replays the same picks; another seed does not.
  const std::vector<float> first(y.cpu_data(), y.cpu_data() + y.count());
  Strata::set_random_seed(9);
  layer.Forward({&x}, {&y});
  EXPECT_TRUE(std::equal(first.begin(), first.end(), y.cpu_data()));
  Strata::set_random_seed(10);
  layer.Forward({&x}, {&y});
  EXPECT_FALSE(std::equal(first.begin(), first.end(), y.cpu_data()));
}

// STOCHASTIC pooling in TEST: the probability-weighted mean sum(x^2) / sum(x), and its exact gradient.
TEST(PoolingLayer, StochasticTestWeightedMean) {
  LayerParameter p = PoolParam(PoolingParameter::STOCHASTIC, 2, 1, 0);
  p.set_phase(TEST);
  Blob<double> x({1, 1, 2, 3}), y;
  const double v[] = {1, 0, 2, 3, 0, 0};
  std::copy(v, v + 6, x.mutable_cpu_data());
  PoolingLayer<double> layer(p);
  layer.SetUp({&x}, {&y});
  EXPECT_FALSE(layer.IsStochastic());
  EXPECT_TRUE(layer.BackwardNeedsBottomData());
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.count(), 2);
  EXPECT_NEAR(y.cpu_data()[0], (1 + 0 + 9 + 0) / 4.0, 1e-12);  // window [[1, 0], [3, 0]]
  EXPECT_NEAR(y.cpu_data()[1], (0 + 4 + 0 + 0) / 2.0, 1e-12);  // window [[0, 2], [0, 0]]
  // An all-zero window gives 0 (Caffe's FLT_MIN in the denominator).
  std::fill(x.mutable_cpu_data(), x.mutable_cpu_data() + 6, 0.0);
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.cpu_data()[0], 0);

  Blob<double> g({2, 3, 5, 4}), gy;
  FillUniform(&g, 0.2, 2.0);  // activations after a ReLU, away from zero sums
  LayerParameter q = PoolParam(PoolingParameter::STOCHASTIC, 3, 2, 0);
  q.set_phase(TEST);
  PoolingLayer<double> grad_layer(q);
  GradientChecker<double> checker(1e-5, 1e-6);
  checker.CheckGradient(&grad_layer, {&g}, {&gy});
}

TEST(PoolingLayer, BadParametersAreErrors) {
  using P = PoolingParameter;
  auto setup = [](const LayerParameter& p, const std::vector<int>& shape, int tops = 1) {
    Blob<float> x(shape), y, z;
    PoolingLayer<float> layer(p);
    std::vector<Blob<float>*> top{&y};
    if (tops == 2) top.push_back(&z);
    layer.SetUp({&x}, top);
  };
  EXPECT_NO_THROW(setup(PoolParam(P::MAX, 3, 2, 1), {1, 1, 5, 5}));
  EXPECT_NO_THROW(setup(PoolParam(P::STOCHASTIC, 3, 2, 0), {1, 1, 5, 5}));
  EXPECT_THROW(setup(PoolParam(P::STOCHASTIC, 3, 2, 1), {1, 1, 5, 5}), Error);  // Caffe pads only MAX and AVE
  EXPECT_THROW(setup(PoolParam(P::STOCHASTIC, 3, 2, 0), {1, 1, 5, 5}, 2), Error);  // only MAX has a mask top
  EXPECT_THROW(setup(PoolParam(P::MAX, 0, 2, 0), {1, 1, 5, 5}), Error);  // no kernel
  LayerParameter both = PoolParam(P::MAX, 3, 1, 0);
  both.mutable_pooling_param()->set_kernel_h(3);
  both.mutable_pooling_param()->set_kernel_w(3);
  EXPECT_THROW(setup(both, {1, 1, 5, 5}), Error);
  LayerParameter half = PoolParam(P::MAX, 0, 1, 0);
  half.mutable_pooling_param()->set_kernel_h(3);
  EXPECT_THROW(setup(half, {1, 1, 5, 5}), Error);
  EXPECT_THROW(setup(PoolParam(P::MAX, 3, 2, 3), {1, 1, 5, 5}), Error);  // pad >= kernel
  EXPECT_THROW(setup(PoolParam(P::AVE, 3, 0, 0), {1, 1, 5, 5}), Error);  // stride 0
  LayerParameter global = GlobalParam(P::MAX);
  global.mutable_pooling_param()->set_kernel_size(2);
  EXPECT_THROW(setup(global, {1, 1, 5, 5}), Error);
  global = GlobalParam(P::MAX);
  global.mutable_pooling_param()->set_stride(2);
  EXPECT_THROW(setup(global, {1, 1, 5, 5}), Error);
  EXPECT_THROW(setup(PoolParam(P::MAX, 3, 1, 0), {1, 5, 5}), Error);  // not 4-D
  EXPECT_THROW(setup(PoolParam(P::MAX, 3, 1, 0), {1, 1, 2, 5}), Error);  // kernel larger than the input
  EXPECT_THROW(setup(PoolParam(P::AVE, 3, 1, 0), {1, 1, 5, 5}, 2), Error);  // only MAX has a mask top
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----
// Windows oneDNN takes (an AVE window past the padding it refuses: test_onednn_layers.cpp); the argmax top and
// STOCHASTIC run on the CAFFE engine only, and are compared on the GPU in test_gpu_layers.cpp.

STRATA_BACKEND_SUITES(Pooling, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(PoolingBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "max3s2" type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 })", {{2, 3, 9, 8}}},
      {R"(name: "max3s2p1" type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 })",
       {{2, 16, 8, 8}}},
      {R"(name: "ave3s2p1" type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 })",
       {{2, 3, 9, 9}}},
      {R"(name: "global_ave" type: "Pooling" pooling_param { pool: AVE global_pooling: true })", {{2, 5, 7, 6}}},
      {R"(name: "global_max" type: "Pooling" pooling_param { pool: MAX global_pooling: true })", {{2, 5, 7, 6}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

// AVE: linear, so finite differences are exact but for rounding; MAX is compared against CAFFE above.
TYPED_TEST(PoolingOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>(
      {R"(name: "ave" type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 })", {{2, 3, 7, 7}}});
  layer_engines::CheckGradient<TypeParam>(
      {R"(name: "global_ave" type: "Pooling" pooling_param { pool: AVE global_pooling: true })", {{2, 3, 4, 5}}});
}

// The GPU's per-element rules (pool_order.hpp), run here on the host in both orders, against the CPU layer: MAX's
// outputs and argmax exactly, AVE's within float rounding, and the gradients of both, through the channels-last
// conversions of the host (memory_format.hpp). So the index rules of the channels-last kernels are checked
// without a GPU; tests/test_gpu_bf16.cpp runs the kernels themselves.
TEST(PoolingOrder, PerElementRulesMatchTheCpuLayerInEitherOrder) {
  struct Case {
    PoolingParameter::PoolMethod method;
    int kernel, stride, pad;
    std::vector<int> shape;
  };
  for (const Case& c : {Case{PoolingParameter::MAX, 3, 2, 1, {2, 5, 11, 10}}, Case{PoolingParameter::MAX, 2, 2, 0,
                        {3, 4, 8, 6}}, Case{PoolingParameter::AVE, 3, 2, 0, {2, 5, 11, 10}},
                        Case{PoolingParameter::AVE, 3, 1, 1, {1, 7, 6, 5}}}) {
    SCOPED_TRACE(::testing::PrintToString(c.shape) + (c.method == PoolingParameter::MAX ? " MAX" : " AVE"));
    const bool max_pool = c.method == PoolingParameter::MAX;
    Blob<float> x(c.shape), y, mask_top;
    std::mt19937 gen(13);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = u(gen);
    LayerParameter param = PoolParam(c.method, c.kernel, c.stride, c.pad);
    auto layer = LayerRegistry<float>::CreateLayer(param);
    std::vector<Blob<float>*> bottom{&x}, top{&y};
    if (max_pool) top.push_back(&mask_top);
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
    for (int i = 0; i < y.count(); ++i) y.mutable_cpu_diff()[i] = u(gen);
    layer->Backward(top, {true}, bottom);

    PoolingLayer<float>::Window w{};
    w.height = c.shape[2];
    w.width = c.shape[3];
    w.pooled_h = y.shape(2);
    w.pooled_w = y.shape(3);
    w.kernel_h = w.kernel_w = c.kernel;
    w.stride_h = w.stride_w = c.stride;
    w.pad_h = w.pad_w = c.pad;
    const int N = c.shape[0], C = c.shape[1];
    const LayoutShape in_shape{N, C, w.height * w.width, 4}, out_shape{N, C, w.pooled_h * w.pooled_w, 4};
    for (bool last : {false, true}) {
      SCOPED_TRACE(last ? "channels-last" : "channels-first");
      std::vector<float> xs(x.cpu_data(), x.cpu_data() + x.count()), dys(y.cpu_diff(), y.cpu_diff() + y.count());
      if (last) {
        std::vector<float> plain = xs;
        ToChannelsLast(in_shape, plain.data(), xs.data());
        plain = dys;
        ToChannelsLast(out_shape, plain.data(), dys.data());
      }
      std::vector<float> ys(y.count()), masks(y.count(), -2.f), dxs(x.count());
      std::vector<int> mask(y.count());
      for (long long k = 0; k < y.count(); ++k) {
        pool_order::Forward(k, xs.data(), w, C, last, max_pool, ys.data(), mask.data(),
                            max_pool ? masks.data() : nullptr);
      }
      for (long long k = 0; k < x.count(); ++k) {
        pool_order::Backward(k, dys.data(), w, C, last, max_pool, mask.data(), dxs.data());
      }
      if (last) {
        std::vector<float> ordered = ys;
        FromChannelsLast(out_shape, ordered.data(), ys.data());
        ordered = dxs;
        FromChannelsLast(in_shape, ordered.data(), dxs.data());
      }
      for (int i = 0; i < y.count(); ++i) {
        if (max_pool) {
          ASSERT_EQ(ys[i], y.cpu_data()[i]) << "output " << i;
          ASSERT_EQ(masks[i], mask_top.cpu_data()[i]) << "mask top " << i;
        } else {
          ASSERT_NEAR(ys[i], y.cpu_data()[i], 1e-6f) << "output " << i;
        }
      }
      for (int i = 0; i < x.count(); ++i) ASSERT_NEAR(dxs[i], x.cpu_diff()[i], 1e-6f) << "input gradient " << i;
    }
  }
}

}  // namespace
}  // namespace strata
