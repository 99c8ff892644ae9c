#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "layer_engines.hpp"
#include "strata/layers/sigmoid_layer.hpp"

namespace strata {
namespace {

LayerParameter SigmoidParam() {
  LayerParameter p;
  p.set_name("sigmoid");
  p.set_type("Sigmoid");
  return p;
}

TEST(SigmoidLayer, HandWorkedForwardBackward) {
  // sigmoid(ln 3) = 1 / (1 + 1/3) = 3/4; sigmoid(-ln 3) = 1/4; sigmoid'(x) = y (1 - y) = 3/16.
  const double xv[] = {0, std::log(3.0), -std::log(3.0), 40, -40};
  const double yv[] = {0.5, 0.75, 0.25, 1, 4.248354255291589e-18};  // e^-40 / (1 + e^-40)
  const double dxv[] = {0.25, 0.1875, 0.1875, 0, 4.248354255291589e-18};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Blob<T> x({5}), y;
    for (int i = 0; i < 5; ++i) x.mutable_cpu_data()[i] = static_cast<T>(xv[i]);
    SigmoidLayer<T> layer(SigmoidParam());
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    cpu_set(5, T(1), y.mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(y.cpu_data()[i], yv[i], 1e-6 * yv[i]) << i;
      EXPECT_NEAR(x.cpu_diff()[i], dxv[i], 1e-6 * dxv[i] + 1e-7) << i;
    }
  };
  run(0.0);
  run(0.0f);
}

// The float kernel against libm in double, over a sweep wide enough to reach both saturated tails, and large
// enough for the multi-threaded path.
TEST(SigmoidLayer, FloatMatchesDouble) {
  const int n = 200001;
  Blob<float> x({n}), y;
  for (int i = 0; i < n; ++i) x.mutable_cpu_data()[i] = -90.0f + 180.0f * i / (n - 1);
  x.mutable_cpu_data()[0] = -std::numeric_limits<float>::infinity();
  x.mutable_cpu_data()[1] = std::numeric_limits<float>::quiet_NaN();
  SigmoidLayer<float> layer(SigmoidParam());
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.cpu_data()[0], 0.0f);
  EXPECT_TRUE(std::isnan(y.cpu_data()[1]));
  for (int i = 2; i < n; ++i) {
    const double ref = 1.0 / (1.0 + std::exp(-static_cast<double>(x.cpu_data()[i])));
    ASSERT_NEAR(y.cpu_data()[i], ref, 4e-7 * ref + 1e-37) << "x = " << x.cpu_data()[i];
  }
}

TEST(SigmoidLayer, Gradient) {
  Blob<double> x({2, 3, 2, 2}), y;
  FillUniform(&x, -4.0, 4.0);
  SigmoidLayer<double> layer(SigmoidParam());
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(SigmoidLayer, InPlaceMatchesOutOfPlace) { ExpectInPlaceMatchesOutOfPlace(SigmoidParam(), {2, 3, 5}); }

TEST(SigmoidLayer, RecomputeHints) {
  SigmoidLayer<float> layer(SigmoidParam());
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
  EXPECT_TRUE(layer.BackwardNeedsTopData());
}

// ---- On each backend: CAFFE on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(Sigmoid, layer_engines::CpuAndGpu, layer_engines::GpuBesideCaffe);

TYPED_TEST(SigmoidBesideCaffe, MatchesCaffeOnCpu) {
  layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>({R"(name: "sigmoid" type: "Sigmoid")", {{2, 3, 5, 4}}});
}

TYPED_TEST(SigmoidOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>({R"(name: "sigmoid" type: "Sigmoid")"});
}

}  // namespace
}  // namespace strata
