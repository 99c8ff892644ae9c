#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layers/eltwise_layer.hpp"

namespace strata {
namespace {

LayerParameter EltwiseParam(EltwiseParameter::EltwiseOp op, std::vector<float> coeffs = {}, bool stable = true) {
  LayerParameter p;
  p.set_name("eltwise");
  p.set_type("Eltwise");
  p.mutable_eltwise_param()->set_operation(op);
  for (float c : coeffs) p.mutable_eltwise_param()->add_coeff(c);
  p.mutable_eltwise_param()->set_stable_prod_grad(stable);
  return p;
}

// Three bottoms of shape (2, 3, 2) whose values differ by at least 0.07 at every position, so MAX has no
// near-ties for the finite differences to cross; none is near 0 (for PROD's top / bottom gradient).
struct ThreeBottoms {
  Blob<double> a{std::vector<int>{2, 3, 2}}, b{std::vector<int>{2, 3, 2}}, c{std::vector<int>{2, 3, 2}};
  std::vector<Blob<double>*> vec() { return {&a, &b, &c}; }
  ThreeBottoms() {
    Blob<double>* blobs[] = {&a, &b, &c};
    for (int k = 0; k < 3; ++k) {
      for (int i = 0; i < 12; ++i) {
        const double v = 0.2 + 0.1 * ((i * 7 + k * 3) % 11) + 0.01 * k;
        blobs[k]->mutable_cpu_data()[i] = (i % 2 ? -v : v);
      }
    }
  }
};

TEST(EltwiseLayer, HandWorkedSumWithCoeffs) {
  Blob<double> a({3}), b({3}), c({3}), y;
  SetValues(&a, {1, 2, 3});
  SetValues(&b, {4, 5, 6});
  SetValues(&c, {-1, 0, 1});
  EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::SUM, {1, -2, 0.5}));
  layer.SetUp({&a, &b, &c}, {&y});
  layer.Forward({&a, &b, &c}, {&y});
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 1 - 8 - 0.5);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], 2 - 10 + 0);
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], 3 - 12 + 0.5);
  SetValues(&y, {0, 0, 0});
  for (int i = 0; i < 3; ++i) y.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&y}, {true, true, true}, {&a, &b, &c});
  EXPECT_DOUBLE_EQ(a.cpu_diff()[2], 3);
  EXPECT_DOUBLE_EQ(b.cpu_diff()[2], -6);
  EXPECT_DOUBLE_EQ(c.cpu_diff()[2], 1.5);
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
}

TEST(EltwiseLayer, HandWorkedProd) {
  Blob<double> a({3}), b({3}), c({3}), y;
  SetValues(&a, {1, 2, 3});
  SetValues(&b, {4, 5, 6});
  SetValues(&c, {-1, 0.5, 2});
  for (bool stable : {true, false}) {
    EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::PROD, {}, stable));
    layer.SetUp({&a, &b, &c}, {&y});
    layer.Forward({&a, &b, &c}, {&y});
    EXPECT_DOUBLE_EQ(y.cpu_data()[0], -4);
    EXPECT_DOUBLE_EQ(y.cpu_data()[1], 5);
    EXPECT_DOUBLE_EQ(y.cpu_data()[2], 36);
    cpu_set(3, 1.0, y.mutable_cpu_diff());
    layer.Backward({&y}, {true, true, true}, {&a, &b, &c});
    EXPECT_DOUBLE_EQ(a.cpu_diff()[1], 2.5);   // 5 * 0.5
    EXPECT_DOUBLE_EQ(b.cpu_diff()[2], 6);     // 3 * 2
    EXPECT_DOUBLE_EQ(c.cpu_diff()[0], 4);     // 1 * 4
    EXPECT_TRUE(layer.BackwardNeedsBottomData());
    EXPECT_EQ(layer.BackwardNeedsTopData(), !stable);
  }
}

TEST(EltwiseLayer, HandWorkedMaxWithTies) {
  Blob<double> a({4}), b({4}), c({4}), y;
  SetValues(&a, {1, 5, 2, 3});
  SetValues(&b, {1, 4, 6, 0});
  SetValues(&c, {0, 5, 7, 3});
  EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::MAX));
  layer.SetUp({&a, &b, &c}, {&y});
  layer.Forward({&a, &b, &c}, {&y});
  const double expected[] = {1, 5, 7, 3};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.cpu_data()[i], expected[i]);
  SetValues(&y, {0, 0, 0, 0});
  for (int i = 0; i < 4; ++i) y.mutable_cpu_diff()[i] = 10 * (i + 1);
  layer.Backward({&y}, {true, true, true}, {&a, &b, &c});
  // A tie between the first two goes to the second; a later bottom wins only when strictly greater.
  const double da[] = {0, 20, 0, 40}, db[] = {10, 0, 0, 0}, dc[] = {0, 0, 30, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.cpu_diff()[i], da[i]) << i;
    EXPECT_EQ(b.cpu_diff()[i], db[i]) << i;
    EXPECT_EQ(c.cpu_diff()[i], dc[i]) << i;
  }
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
}

TEST(EltwiseLayer, GradientSum) {
  for (std::vector<float> coeffs : {std::vector<float>{}, std::vector<float>{1, -0.5, 2}}) {
    ThreeBottoms in;
    Blob<double> y;
    EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::SUM, coeffs));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, in.vec(), {&y});
  }
}

TEST(EltwiseLayer, GradientProd) {
  for (bool stable : {true, false}) {
    ThreeBottoms in;
    Blob<double> y;
    EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::PROD, {}, stable));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, in.vec(), {&y});
  }
}

TEST(EltwiseLayer, GradientMax) {
  ThreeBottoms in;
  Blob<double> y;
  EltwiseLayer<double> layer(EltwiseParam(EltwiseParameter::MAX));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, in.vec(), {&y});
  Blob<double> a2({3, 2}), b2({3, 2}), y2;
  FillUniform(&a2, -1.0, 1.0, 5);
  FillUniform(&b2, -1.0, 1.0, 6);
  checker.CheckGradient(&layer, {&a2, &b2}, {&y2});
}

TEST(EltwiseLayer, InPlaceMatchesOutOfPlace) {
  for (auto op : {EltwiseParameter::SUM, EltwiseParameter::MAX}) {
    ThreeBottoms ref, inplace;
    Blob<double> y;
    const std::vector<float> coeffs = op == EltwiseParameter::SUM ? std::vector<float>{2, -1, 0.5} : std::vector<float>{};
    EltwiseLayer<double> out_of_place(EltwiseParam(op, coeffs)), in_place(EltwiseParam(op, coeffs));
    out_of_place.SetUp(ref.vec(), {&y});
    in_place.SetUp(inplace.vec(), {&inplace.a});
    out_of_place.Forward(ref.vec(), {&y});
    in_place.Forward(inplace.vec(), {&inplace.a});
    Blob<double> dy({2, 3, 2});
    FillUniform(&dy, -1.0, 1.0, 9);
    for (int i = 0; i < y.count(); ++i) {
      EXPECT_EQ(inplace.a.cpu_data()[i], y.cpu_data()[i]);
      y.mutable_cpu_diff()[i] = inplace.a.mutable_cpu_diff()[i] = dy.cpu_data()[i];
    }
    out_of_place.Backward({&y}, {true, true, true}, ref.vec());
    in_place.Backward({&inplace.a}, {true, true, true}, inplace.vec());
    for (int i = 0; i < y.count(); ++i) {
      EXPECT_EQ(inplace.a.cpu_diff()[i], ref.a.cpu_diff()[i]);
      EXPECT_EQ(inplace.b.cpu_diff()[i], ref.b.cpu_diff()[i]);
      EXPECT_EQ(inplace.c.cpu_diff()[i], ref.c.cpu_diff()[i]);
    }
  }
}

TEST(EltwiseLayer, LargeBlobsUseTheThreadedLoops) {
  Blob<float> a({4, 16, 32, 32}), b({4, 16, 32, 32}), y;
  FillUniform(&a, -1.0f, 1.0f, 1);
  FillUniform(&b, -1.0f, 1.0f, 2);
  EltwiseLayer<float> layer(EltwiseParam(EltwiseParameter::MAX));
  layer.SetUp({&a, &b}, {&y});
  layer.Forward({&a, &b}, {&y});
  for (int i = 0; i < y.count(); ++i) ASSERT_EQ(y.cpu_data()[i], std::max(a.cpu_data()[i], b.cpu_data()[i]));
}

TEST(EltwiseLayer, BadInputIsAnError) {
  Blob<float> a({2, 3}), b({2, 3}), c({3, 2}), y;
  EXPECT_THROW(EltwiseLayer<float>(EltwiseParam(EltwiseParameter::SUM, {1})).SetUp({&a, &b}, {&y}), Error);
  EXPECT_THROW(EltwiseLayer<float>(EltwiseParam(EltwiseParameter::PROD, {1, 1})).SetUp({&a, &b}, {&y}), Error);
  EXPECT_THROW(EltwiseLayer<float>(EltwiseParam(EltwiseParameter::SUM)).SetUp({&a, &c}, {&y}), Error);
  EXPECT_THROW(EltwiseLayer<float>(EltwiseParam(EltwiseParameter::SUM)).SetUp({&a}, {&y}), Error);
  EXPECT_THROW(EltwiseLayer<float>(EltwiseParam(EltwiseParameter::PROD)).SetUp({&a, &b}, {&a}), Error);
}

// ---- On each backend: the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(Eltwise, layer_engines::CpuAndGpu, layer_engines::GpuBesideCaffe);

TYPED_TEST(EltwiseBesideCaffe, MatchesCaffeOnCpu) {
  layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>({R"(name: "sum" type: "Eltwise"
      eltwise_param { operation: SUM coeff: 1 coeff: -0.5 })", {{2, 3, 4, 5}, {2, 3, 4, 5}}});
}

// A sum absorbs the ReLU after it, on every backend: the net computes what the separate layers compute.
TYPED_TEST(EltwiseOn, AbsorbingItsReluChangesNothing) {
  const std::vector<std::string> absorbed = layer_engines::ExpectFusionChangesNothing<TypeParam>(R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 16 dim: 4 dim: 5 } } }
      layer { name: "scale" type: "Scale" bottom: "x" top: "s" scale_param {
              filler { type: "uniform" min: -1 max: 1 } } }
      layer { name: "sum" type: "Eltwise" bottom: "x" bottom: "s" top: "sum" }
      layer { name: "relu" type: "ReLU" bottom: "sum" top: "sum" }
      layer { name: "loss" type: "Reduction" bottom: "sum" top: "loss" reduction_param { operation: SUMSQ }
              loss_weight: 1 })", 1e-6);
  EXPECT_EQ(absorbed, (std::vector<std::string>{"relu"}));
}

}  // namespace
}  // namespace strata
