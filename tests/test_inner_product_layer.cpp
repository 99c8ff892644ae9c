#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layers/inner_product_layer.hpp"

namespace strata {
namespace {

LayerParameter IpParam(int num_output, bool bias, bool transpose, int axis = 1) {
  LayerParameter p;
  p.set_name("ip");
  p.set_type("InnerProduct");
  auto* ip = p.mutable_inner_product_param();
  ip->set_num_output(num_output);
  ip->set_bias_term(bias);
  ip->set_transpose(transpose);
  ip->set_axis(axis);
  ip->mutable_weight_filler()->set_type("gaussian");
  ip->mutable_bias_filler()->set_type("uniform");
  ip->mutable_bias_filler()->set_min(-1);
  return p;
}

TEST(InnerProductLayer, HandWorkedForward) {
  Blob<double> x({2, 3}), y;
  const double xv[] = {1, 2, 3, -1, 0, 1};
  std::copy(xv, xv + 6, x.mutable_cpu_data());
  InnerProductLayer<double> layer(IpParam(2, true, false));
  layer.SetUp({&x}, {&y});
  const double w[] = {1, 0, -1, 0.5, 0.5, 0.5};  // 2 x 3
  std::copy(w, w + 6, layer.blobs()[0]->mutable_cpu_data());
  layer.blobs()[1]->mutable_cpu_data()[0] = 10;
  layer.blobs()[1]->mutable_cpu_data()[1] = -10;
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 2}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 1 - 3 + 10);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], 3 - 10);
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], -1 - 1 + 10);
  EXPECT_DOUBLE_EQ(y.cpu_data()[3], 0 - 10);
}

TEST(InnerProductLayer, TransposeMatchesPlain) {
  Blob<double> x({3, 4}), y1, y2;
  FillUniform(&x, -1.0, 1.0);
  InnerProductLayer<double> plain(IpParam(5, true, false));
  InnerProductLayer<double> trans(IpParam(5, true, true));
  plain.SetUp({&x}, {&y1});
  trans.SetUp({&x}, {&y2});
  ASSERT_EQ(trans.blobs()[0]->shape(), (std::vector<int>{4, 5}));
  for (int o = 0; o < 5; ++o)
    for (int k = 0; k < 4; ++k)
      trans.blobs()[0]->mutable_cpu_data()[k * 5 + o] = plain.blobs()[0]->cpu_data()[o * 4 + k];
  trans.blobs()[1]->CopyFrom(*plain.blobs()[1]);
  plain.Forward({&x}, {&y1});
  trans.Forward({&x}, {&y2});
  for (int i = 0; i < y1.count(); ++i) EXPECT_NEAR(y1.cpu_data()[i], y2.cpu_data()[i], 1e-12);
}

TEST(InnerProductLayer, Gradient) {
  for (bool transpose : {false, true}) {
    for (bool bias : {false, true}) {
      Blob<double> x({2, 3, 2, 2}), y;
      FillUniform(&x, -1.0, 1.0);
      InnerProductLayer<double> layer(IpParam(4, bias, transpose));
      GradientChecker<double> checker(1e-4, 1e-6);
      checker.CheckGradient(&layer, {&x}, {&y});
    }
  }
}

TEST(InnerProductLayer, GradientAxis2) {
  Blob<double> x({2, 3, 4}), y;
  FillUniform(&x, -1.0, 1.0);
  InnerProductLayer<double> layer(IpParam(3, true, false, 2));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 3}));
}

TEST(InnerProductLayer, ShapeMismatchIsAnError) {
  Blob<float> x({2, 6}), y;
  InnerProductLayer<float> layer(IpParam(4, true, false));
  layer.SetUp({&x}, {&y});
  x.Reshape({2, 7});
  EXPECT_THROW(layer.Reshape({&x}, {&y}), Error);
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(InnerProduct, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(InnerProductBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "ip" type: "InnerProduct" inner_product_param { num_output: 7 )" + layer_engines::kFillers + R"( })",
       {{5, 3, 2, 2}}},
      {R"(name: "ip_transpose" type: "InnerProduct" inner_product_param { num_output: 6 transpose: true
          )" + layer_engines::kFillers + R"( })", {{4, 10}}},
      {R"(name: "ip_nobias_axis2" type: "InnerProduct" inner_product_param { num_output: 5 axis: 2
          bias_term: false weight_filler { type: "gaussian" std: 0.3 } })", {{3, 4, 6}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

TYPED_TEST(InnerProductOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>(
      {R"(name: "ip" type: "InnerProduct" inner_product_param { num_output: 4 )" + layer_engines::kFillers + R"( })"});
  layer_engines::CheckGradient<TypeParam>({R"(name: "ip_transpose" type: "InnerProduct" inner_product_param {
      num_output: 3 transpose: true )" + layer_engines::kFillers + R"( })", {{3, 5}}});
}

}  // namespace
}  // namespace strata
