#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "layer_engines.hpp"
#include "strata/layers/relu_layer.hpp"

namespace strata {
namespace {

LayerParameter ReLUParam(float negative_slope) {
  LayerParameter p;
  p.set_name("relu");
  p.set_type("ReLU");
  p.mutable_relu_param()->set_negative_slope(negative_slope);
  return p;
}

TEST(ReLULayer, HandWorkedForwardBackward) {
  const double xv[] = {-2, -0.5, 0, 0.5, 3};
  const double dyv[] = {1, 2, 3, 4, 5};
  // slope 0: max(x, 0); slope 0.1: x or 0.1 x. At x = 0 the gradient is the slope (Caffe).
  const double y0[] = {0, 0, 0, 0.5, 3}, dx0[] = {0, 0, 0, 4, 5};
  const double y1[] = {-0.2, -0.05, 0, 0.5, 3}, dx1[] = {0.1, 0.2, 0.3, 4, 5};
  for (double slope : {0.0, 0.1}) {
    Blob<double> x({5}), y;
    std::copy(xv, xv + 5, x.mutable_cpu_data());
    ReLULayer<double> layer(ReLUParam(static_cast<float>(slope)));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    ASSERT_EQ(y.shape(), x.shape());
    std::copy(dyv, dyv + 5, y.mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(y.cpu_data()[i], slope == 0 ? y0[i] : y1[i], 1e-7) << "slope " << slope << " element " << i;
      EXPECT_NEAR(x.cpu_diff()[i], slope == 0 ? dx0[i] : dx1[i], 1e-7) << "slope " << slope << " element " << i;
    }
  }
}

TEST(ReLULayer, NaNPassesThroughForward) {
  for (float slope : {0.0f, 0.2f}) {
    Blob<float> x({3}), y;
    x.mutable_cpu_data()[0] = std::numeric_limits<float>::quiet_NaN();
    x.mutable_cpu_data()[1] = -1;
    x.mutable_cpu_data()[2] = 2;
    ReLULayer<float> layer(ReLUParam(slope));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    EXPECT_TRUE(std::isnan(y.cpu_data()[0]));
    EXPECT_FLOAT_EQ(y.cpu_data()[1], -slope);
    EXPECT_FLOAT_EQ(y.cpu_data()[2], 2);
  }
}

TEST(ReLULayer, LargeBlobFloat) {
  // Large enough for the multi-threaded path.
  Blob<float> x({3, 100, 401}), y;
  FillUniform(&x, -1.0f, 1.0f);
  ReLULayer<float> layer(ReLUParam(0.25f));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  cpu_set(y.count(), 1.0f, y.mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  for (int i = 0; i < x.count(); ++i) {
    const float v = x.cpu_data()[i];
    ASSERT_EQ(y.cpu_data()[i], v > 0 ? v : 0.25f * v) << i;
    ASSERT_EQ(x.cpu_diff()[i], v > 0 ? 1.0f : 0.25f) << i;
  }
}

TEST(ReLULayer, Gradient) {
  for (float slope : {0.0f, 0.3f, -0.5f}) {
    Blob<double> x({2, 3, 3, 2}), y;
    FillUniform(&x, -1.0, 1.0);
    ReLULayer<double> layer(ReLUParam(slope));
    // Values within 0.01 of the kink at 0 are skipped (the step is 1e-3).
    GradientChecker<double> checker(1e-3, 1e-6, 1701, 0.0, 1e-2);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(ReLULayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(ReLUParam(0), {2, 3, 4});
  ExpectInPlaceMatchesOutOfPlace(ReLUParam(0.2f), {2, 3, 4});
}

TEST(ReLULayer, NegativeSlopeInPlaceBackwardIsAnError) {
  Blob<float> x({4});
  FillUniform(&x, -1.0f, 1.0f);
  ReLULayer<float> layer(ReLUParam(-0.5f));
  layer.SetUp({&x}, {&x});
  layer.Forward({&x}, {&x});  // forward alone is fine
  EXPECT_THROW(layer.Backward({&x}, {true}, {&x}), Error);
}

TEST(ReLULayer, RecomputeHints) {
  ReLULayer<float> leaky(ReLUParam(0.1f)), negative(ReLUParam(-0.1f));
  EXPECT_FALSE(leaky.BackwardNeedsBottomData());
  EXPECT_TRUE(leaky.BackwardNeedsTopData());
  EXPECT_TRUE(negative.BackwardNeedsBottomData());
  EXPECT_FALSE(negative.BackwardNeedsTopData());
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(ReLU, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(ReLUBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "relu" type: "ReLU")", {{2, 3, 5, 4}}},
      {R"(name: "relu_in_place" type: "ReLU")", {{2, 3, 5, 4}}, 1, -1, 0, true},
      {R"(name: "leaky" type: "ReLU" relu_param { negative_slope: 0.1 })", {{2, 3, 5, 4}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

TYPED_TEST(ReLUOn, GradientCheck) {
  for (const char* text : {R"(name: "relu" type: "ReLU")",
                           R"(name: "leaky" type: "ReLU" relu_param { negative_slope: 0.1 })"}) {
    gpu_compare::GradientCase c{text};
    c.kink_range = 0.05;  // the kink at 0: wider than the float check's step
    layer_engines::CheckGradient<TypeParam>(c);
  }
}

}  // namespace
}  // namespace strata
