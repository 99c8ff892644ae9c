#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/lrn_layer.hpp"
#include "strata/layers/lrn_window.hpp"
#include "strata/memory_format.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter LrnParam(int size, float alpha, float beta, float k, bool within = false) {
  LayerParameter p;
  p.set_name("lrn");
  p.set_type("LRN");
  auto* l = p.mutable_lrn_param();
  l->set_local_size(size);
  l->set_alpha(alpha);
  l->set_beta(beta);
  l->set_k(k);
  l->set_norm_region(within ? LRNParameter::WITHIN_CHANNEL : LRNParameter::ACROSS_CHANNELS);
  return p;
}

TEST(LRNLayer, HandWorkedAcrossChannels) {
  // x = 1, 2, 3 in three channels of one pixel; n = 3, alpha = 3 (alpha/n = 1), k = 1.
  // Channel windows (clipped): {0,1}: 1+4 = 5; {0,1,2}: 14; {1,2}: 13. scale = 6, 15, 14.
  Blob<double> x({1, 3, 1, 1}), y;
  for (int c = 0; c < 3; ++c) x.mutable_cpu_data()[c] = c + 1;
  for (double beta : {1.0, 0.75, 0.625}) {  // exact in the float proto field
    LRNLayer<double> layer(LrnParam(3, 3, beta, 1));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    ASSERT_EQ(y.shape(), x.shape());
    EXPECT_NEAR(y.cpu_data()[0], 1 * std::pow(6.0, -beta), 1e-14) << beta;
    EXPECT_NEAR(y.cpu_data()[1], 2 * std::pow(15.0, -beta), 1e-14) << beta;
    EXPECT_NEAR(y.cpu_data()[2], 3 * std::pow(14.0, -beta), 1e-14) << beta;
  }
}

TEST(LRNLayer, HandWorkedWithinChannel) {
  // x = 1..9 in a 3x3 plane, n = 3, alpha = 9 (alpha/n^2 = 1), beta = 1; k is not used in this mode.
  Blob<double> x({1, 1, 3, 3}), y;
  for (int i = 0; i < 9; ++i) x.mutable_cpu_data()[i] = i + 1;
  LRNLayer<double> layer(LrnParam(3, 9, 1, 5, true));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_NEAR(y.cpu_data()[0], 1.0 / (1 + 1 + 4 + 16 + 25), 1e-15);             // corner: 2x2 window
  EXPECT_NEAR(y.cpu_data()[1], 2.0 / (1 + 1 + 4 + 9 + 16 + 25 + 36), 1e-15);     // edge: 2x3 window
  EXPECT_NEAR(y.cpu_data()[4], 5.0 / (1 + 285), 1e-15);                          // centre: all nine
  EXPECT_NEAR(y.cpu_data()[8], 9.0 / (1 + 25 + 36 + 64 + 81), 1e-15);
}

void CheckLrnGradient(const LayerParameter& p, const std::vector<int>& shape) {
  Blob<double> x(shape), y;
  FillUniform(&x, -1.0, 1.0);
  LRNLayer<double> layer(p);
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(LRNLayer, GradientAcrossChannels) {
  CheckLrnGradient(LrnParam(5, 2, 0.75, 1), {2, 7, 3, 2});   // windows clipped at both ends
  CheckLrnGradient(LrnParam(3, 1.5, 0.6, 2), {1, 4, 2, 3});  // general beta (pow)
  CheckLrnGradient(LrnParam(5, 3, 0.5, 1), {2, 2, 2, 2});    // fewer channels than the window
  CheckLrnGradient(LrnParam(1, 1, 1, 1), {1, 3, 2, 2});
}

TEST(LRNLayer, GradientWithinChannel) {
  CheckLrnGradient(LrnParam(3, 2, 0.75, 1, true), {2, 2, 4, 5});
  CheckLrnGradient(LrnParam(5, 4, 0.6, 1, true), {1, 2, 3, 6});  // window wider than the plane is tall
}

// Direct window sums for checking the running-sum / separable versions on inputs large enough to be split
// into pixel blocks and run in parallel.
double DirectLrn(const Blob<float>& x, int n, int c, int h, int w, int size, double alpha, double beta, double k,
                 bool within) {
  const int pre = (size - 1) / 2;
  double sum = 0;
  if (within) {
    for (int i = h - pre; i <= h + pre; ++i)
      for (int j = w - pre; j <= w + pre; ++j)
        if (i >= 0 && i < x.height() && j >= 0 && j < x.width()) sum += std::pow(x.data_at(n, c, i, j), 2);
    return x.data_at(n, c, h, w) * std::pow(1 + alpha * sum / (size * size), -beta);
  }
  for (int i = std::max(0, c - pre); i <= std::min(x.channels() - 1, c + pre); ++i) {
    sum += std::pow(x.data_at(n, i, h, w), 2);
  }
  return x.data_at(n, c, h, w) * std::pow(k + alpha / size * sum, -beta);
}

TEST(LRNLayer, LargeInputMatchesDirectSums) {
  Blob<float> x({2, 9, 37, 41}), y;  // 1517 pixels: three pixel blocks per image
  FillUniform(&x, -2.0f, 2.0f);
  for (bool within : {false, true}) {
    for (float beta : {0.75f, 0.6f}) {
      LRNLayer<float> layer(LrnParam(5, 1e-1f, beta, 2, within));
      layer.SetUp({&x}, {&y});
      layer.Forward({&x}, {&y});
      for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 9; c += 4)
          for (int h = 0; h < 37; h += 6)
            for (int w = 0; w < 41; w += 5)
              ASSERT_NEAR(y.data_at(n, c, h, w), DirectLrn(x, n, c, h, w, 5, 0.1, beta, 2, within), 1e-5)
                  << within << " " << n << " " << c << " " << h << " " << w;
    }
  }
}

TEST(LRNLayer, CaffePrototxt) {
  LayerParameter p;  // AlexNet's norm1
  ReadProtoFromTextString(R"(
    name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
    lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 })", &p);
  auto layer = LayerRegistry<double>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "LRN");
  Blob<double> x({1, 5, 1, 1}), y;
  for (int c = 0; c < 5; ++c) x.mutable_cpu_data()[c] = 10;
  layer->SetUp({&x}, {&y});
  layer->Forward({&x}, {&y});
  // The middle channel sees all five: scale = 1 + 0.0001/5 * 500 = 1.01 (alpha as the float proto holds it).
  EXPECT_NEAR(y.cpu_data()[2], 10 * std::pow(1 + double(0.0001f) / 5 * 500, -0.75), 1e-12);
}

TEST(LRNLayer, BadParametersAreErrors) {
  auto setup = [](const LayerParameter& p, const std::vector<int>& shape) {
    Blob<float> x(shape), y;
    LRNLayer<float> layer(p);
    layer.SetUp({&x}, {&y});
  };
  EXPECT_NO_THROW(setup(LrnParam(5, 1, 0.75, 1), {1, 3, 2, 2}));
  EXPECT_THROW(setup(LrnParam(4, 1, 0.75, 1), {1, 3, 2, 2}), Error);  // even window
  EXPECT_THROW(setup(LrnParam(0, 1, 0.75, 1), {1, 3, 2, 2}), Error);
  EXPECT_THROW(setup(LrnParam(3, 1, 0.75, 1), {3, 2, 2}), Error);  // not 4-D
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(LRN, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(LRNBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "lrn" type: "LRN" lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 })", {{2, 7, 5, 4}}},
      {R"(name: "lrn_big_alpha" type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 })",
       {{2, 6, 4, 4}}},
      {R"(name: "lrn16" type: "LRN" lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 })", {{2, 16, 5, 5}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

TYPED_TEST(LRNOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>(
      {R"(name: "lrn" type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 })", {{2, 5, 3, 3}}});
}

// The GPU's per-value rules (lrn_window.hpp), run here on the host in both orders of the activations, against the
// CPU layer (its running sums, or oneDNN's): the index rules of the channels-last kernels, checked without a GPU.
TEST(LRNWindow, PerValueRulesMatchTheCpuLayerInEitherOrder) {
  for (bool within : {false, true}) {
    SCOPED_TRACE(within ? "WITHIN_CHANNEL" : "ACROSS_CHANNELS");
    const std::vector<int> shape{2, 7, 5, 4};
    Blob<float> x(shape), y;
    std::mt19937 gen(17);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = u(gen);
    const float alpha = 0.1f, beta = 0.75f, k = 2.f;
    const int size = within ? 3 : 5;
    auto layer = LayerRegistry<float>::CreateLayer(LrnParam(size, alpha, beta, k, within));
    std::vector<Blob<float>*> bottom{&x}, top{&y};
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
    for (int i = 0; i < y.count(); ++i) y.mutable_cpu_diff()[i] = u(gen);
    layer->Backward(top, {true}, bottom);
    const float coef = 2 * alpha * beta / (within ? size * size : size);
    const LayoutShape order_shape{shape[0], shape[1], shape[2] * shape[3], 4};
    for (bool last : {false, true}) {
      SCOPED_TRACE(last ? "channels-last" : "channels-first");
      auto in_order = [&](const float* plain) {
        std::vector<float> v(plain, plain + x.count());
        if (last) ToChannelsLast(order_shape, plain, v.data());
        return v;
      };
      const std::vector<float> xs = in_order(x.cpu_data()), dys = in_order(y.cpu_diff());
      std::vector<float> ys(x.count()), scale(x.count()), dxs(x.count());
      const lrn_window::Window w{ImageLayout{shape[1], shape[2] * shape[3], last}, shape[3], size, !within};
      for (long long i = 0; i < x.count(); ++i) {
        lrn_window::Forward(i, xs.data(), w, alpha, beta, k, scale.data(), ys.data());
      }
      for (long long i = 0; i < x.count(); ++i) {
        lrn_window::Backward(i, xs.data(), ys.data(), dys.data(), scale.data(), w, coef, beta, dxs.data());
      }
      const std::vector<float> want_y = in_order(y.cpu_data()), want_dx = in_order(x.cpu_diff());
      for (int i = 0; i < x.count(); ++i) {
        ASSERT_NEAR(ys[i], want_y[i], 1e-5f) << "output " << i;
        ASSERT_NEAR(dxs[i], want_dx[i], 1e-5f) << "input gradient " << i;
      }
    }
  }
}

}  // namespace
}  // namespace strata
