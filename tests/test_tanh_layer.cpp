#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "layer_engines.hpp"
#include "strata/layers/tanh_layer.hpp"

namespace strata {
namespace {

LayerParameter TanHParam() {
  LayerParameter p;
  p.set_name("tanh");
  p.set_type("TanH");
  return p;
}

// tanh(atanh(t)) = t with atanh(t) = ln((1 + t) / (1 - t)) / 2, so inputs built that way have known outputs.
double Atanh(double t) { return 0.5 * std::log((1 + t) / (1 - t)); }

TEST(TanHLayer, HandWorkedForwardBackward) {
  const double tv[] = {0, 0.01, 0.2, 0.5, -0.6, 0.8, -0.999};
  const int n = 7;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Blob<T> x({n}), y;
    for (int i = 0; i < n; ++i) x.mutable_cpu_data()[i] = static_cast<T>(Atanh(tv[i]));
    TanHLayer<T> layer(TanHParam());
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    cpu_set(n, T(2), y.mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(y.cpu_data()[i], tv[i], 1e-6 * std::fabs(tv[i]) + 1e-12) << i;
      EXPECT_NEAR(x.cpu_diff()[i], 2 * (1 - tv[i] * tv[i]), 1e-5) << i;  // d tanh = 1 - y^2
    }
  };
  run(0.0);
  run(0.0f);
}

// The float kernel against libm in double, including the switch between its two formulas at |x| = 0.4.
TEST(TanHLayer, FloatMatchesDouble) {
  const int n = 200001;
  Blob<float> x({n}), y;
  for (int i = 0; i < n; ++i) x.mutable_cpu_data()[i] = -12.0f + 24.0f * i / (n - 1);
  x.mutable_cpu_data()[0] = -std::numeric_limits<float>::infinity();
  x.mutable_cpu_data()[1] = std::numeric_limits<float>::quiet_NaN();
  x.mutable_cpu_data()[2] = 1e-30f;
  x.mutable_cpu_data()[3] = 0.4f;
  TanHLayer<float> layer(TanHParam());
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.cpu_data()[0], -1.0f);
  EXPECT_TRUE(std::isnan(y.cpu_data()[1]));
  for (int i = 2; i < n; ++i) {
    const double ref = std::tanh(static_cast<double>(x.cpu_data()[i]));
    ASSERT_NEAR(y.cpu_data()[i], ref, 4e-7 * std::fabs(ref)) << "x = " << x.cpu_data()[i];
  }
}

TEST(TanHLayer, Gradient) {
  Blob<double> x({2, 3, 2, 2}), y;
  FillUniform(&x, -2.0, 2.0);
  TanHLayer<double> layer(TanHParam());
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(TanHLayer, InPlaceMatchesOutOfPlace) { ExpectInPlaceMatchesOutOfPlace(TanHParam(), {2, 3, 5}); }

TEST(TanHLayer, RecomputeHints) {
  TanHLayer<float> layer(TanHParam());
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
  EXPECT_TRUE(layer.BackwardNeedsTopData());
}

// ---- On each backend: CAFFE on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(TanH, layer_engines::CpuAndGpu, layer_engines::GpuBesideCaffe);

TYPED_TEST(TanHBesideCaffe, MatchesCaffeOnCpu) {
  layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>({R"(name: "tanh" type: "TanH")", {{2, 3, 5, 4}}});
}

TYPED_TEST(TanHOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>({R"(name: "tanh" type: "TanH")"});
}

}  // namespace
}  // namespace strata
