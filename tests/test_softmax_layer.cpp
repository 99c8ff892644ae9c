#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "layer_engines.hpp"
#include "strata/layers/softmax_layer.hpp"

namespace strata {
namespace {

LayerParameter SoftmaxParam(int axis = 1) {
  LayerParameter p;
  p.set_name("softmax");
  p.set_type("Softmax");
  p.mutable_softmax_param()->set_axis(axis);
  return p;
}

// softmax(log a + shift) = a / sum(a) for any shift; large shifts check the max subtraction.
TEST(SoftmaxLayer, HandWorkedForward) {
  const double a[2][4] = {{1, 2, 3, 4}, {1, 1, 2, 4}};
  const double shift[2] = {100, -50};
  const double expect[2][4] = {{0.1, 0.2, 0.3, 0.4}, {0.125, 0.125, 0.25, 0.5}};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Blob<T> x({2, 4}), y;
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) x.mutable_cpu_data()[r * 4 + c] = static_cast<T>(std::log(a[r][c]) + shift[r]);
    SoftmaxLayer<T> layer(SoftmaxParam());
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    ASSERT_EQ(y.shape(), x.shape());
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(y.cpu_data()[r * 4 + c], expect[r][c], 2e-5) << r << "," << c;
  };
  run(0.0);
  run(0.0f);
}

// Softmax along axis 1 of a (1, 3, 2) blob: each of the two strided fibres is normalised on its own.
TEST(SoftmaxLayer, HandWorkedStridedAxis) {
  Blob<double> x({1, 3, 2}), y;
  const double v[] = {std::log(1.0), 7, std::log(1.0), 7, std::log(2.0), 7};  // fibres {1,1,2} and {e^7 x 3}
  std::copy(v, v + 6, x.mutable_cpu_data());
  SoftmaxLayer<double> layer(SoftmaxParam(1));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  const double expect[] = {0.25, 1.0 / 3, 0.25, 1.0 / 3, 0.5, 1.0 / 3};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y.cpu_data()[i], expect[i], 1e-12) << i;
}

// y = (0.1, 0.2, 0.3, 0.4), dy = (1, 0, 0, 0): sum(dy * y) = 0.1, dx = (dy - 0.1) * y.
TEST(SoftmaxLayer, HandWorkedBackward) {
  Blob<double> x({1, 4}), y;
  for (int c = 0; c < 4; ++c) x.mutable_cpu_data()[c] = std::log(c + 1.0);
  SoftmaxLayer<double> layer(SoftmaxParam());
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  cpu_set(4, 0.0, y.mutable_cpu_diff());
  y.mutable_cpu_diff()[0] = 1;
  layer.Backward({&y}, {true}, {&x});
  const double expect[] = {0.09, -0.02, -0.03, -0.04};
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(x.cpu_diff()[c], expect[c], 1e-12) << c;
}

TEST(SoftmaxLayer, Gradient) {
  for (int axis : {0, 1, 2, -1}) {
    Blob<double> x({2, 3, 2, 3}), y;
    FillUniform(&x, -2.0, 2.0);
    SoftmaxLayer<double> layer(SoftmaxParam(axis));
    GradientChecker<double> checker(1e-4, 1e-7);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

// The float path (vectorised exp, tiles over the strided axis, several threads) against the double one, on
// shapes with contiguous rows and with a stride longer than a tile.
TEST(SoftmaxLayer, FloatMatchesDouble) {
  const std::vector<std::vector<int>> shapes = {{64, 1000}, {2, 21, 300}, {3, 5, 1, 1}};
  for (const auto& shape : shapes) {
    Blob<float> xf(shape), yf;
    Blob<double> xd(shape), yd, dy(shape);
    FillUniform(&xf, -30.0f, 30.0f);
    FillUniform(&dy, -1.0, 1.0, 3);
    for (int i = 0; i < xf.count(); ++i) xd.mutable_cpu_data()[i] = xf.cpu_data()[i];
    SoftmaxLayer<float> lf(SoftmaxParam());
    SoftmaxLayer<double> ld(SoftmaxParam());
    lf.SetUp({&xf}, {&yf});
    ld.SetUp({&xd}, {&yd});
    lf.Forward({&xf}, {&yf});
    ld.Forward({&xd}, {&yd});
    for (int i = 0; i < dy.count(); ++i) yf.mutable_cpu_diff()[i] = static_cast<float>(dy.cpu_data()[i]);
    cpu_copy(dy.count(), dy.cpu_data(), yd.mutable_cpu_diff());
    lf.Backward({&yf}, {true}, {&xf});
    ld.Backward({&yd}, {true}, {&xd});
    for (int i = 0; i < xf.count(); ++i) {
      const double ref = yd.cpu_data()[i];
      // float rounds x - max to ~1e-6 relative for |x| ~ 30, and e^(x - max) inherits it.
      ASSERT_NEAR(yf.cpu_data()[i], ref, 1e-5 * ref + 1e-30) << "forward, element " << i;
      ASSERT_NEAR(xf.cpu_diff()[i], xd.cpu_diff()[i], 1e-6) << "backward, element " << i;
    }
  }
}

TEST(SoftmaxLayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(SoftmaxParam(1), {2, 3, 4});
  ExpectInPlaceMatchesOutOfPlace(SoftmaxParam(-1), {2, 3, 4});
}

TEST(SoftmaxLayer, BadAxisIsAnError) {
  Blob<float> x({2, 3}), y;
  SoftmaxLayer<float> layer(SoftmaxParam(2));
  EXPECT_THROW(layer.SetUp({&x}, {&y}), Error);
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(Softmax, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(SoftmaxBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "softmax" type: "Softmax")", {{6, 10}}},
      {R"(name: "softmax_wide" type: "Softmax")", {{3, 1000}}},
      {R"(name: "softmax_spatial" type: "Softmax")", {{2, 5, 3, 4}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

TYPED_TEST(SoftmaxOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>({R"(name: "softmax" type: "Softmax")"});
}

}  // namespace
}  // namespace strata
