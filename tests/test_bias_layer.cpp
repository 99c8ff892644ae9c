#include <gtest/gtest.h>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layers/bias_layer.hpp"

namespace strata {
namespace {

LayerParameter BiasParam(int axis, int num_axes, bool random_filler = true) {
  LayerParameter p;
  p.set_name("bias");
  p.set_type("Bias");
  p.mutable_bias_param()->set_axis(axis);
  p.mutable_bias_param()->set_num_axes(num_axes);
  if (random_filler) {
    p.mutable_bias_param()->mutable_filler()->set_type("uniform");
    p.mutable_bias_param()->mutable_filler()->set_min(-1);
  }
  return p;
}

TEST(BiasLayer, HandWorkedLearnedBias) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, 2, 3, 4, 5, 6});
  BiasLayer<double> layer(BiasParam(1, 1, false));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 1u);
  ExpectValues(layer.blobs()[0]->cpu_data(), {0, 0, 0});  // the default filler: identity
  SetValues(layer.blobs()[0].get(), {10, -1, 0.5});
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {11, 1, 3.5, 14, 4, 6.5});
  SetValues(&y, {0, 0, 0, 0, 0, 0});
  for (int i = 0; i < 6; ++i) y.mutable_cpu_diff()[i] = i + 1;
  cpu_set(3, 0.0, layer.blobs()[0]->mutable_cpu_diff());
  for (int pass = 1; pass <= 2; ++pass) {
    layer.Backward({&y}, {true}, {&x});
    ExpectValues(x.cpu_diff(), {1, 2, 3, 4, 5, 6});
    ExpectValues(layer.blobs()[0]->cpu_diff(), {5.0 * pass, 7.0 * pass, 9.0 * pass});  // accumulates
  }
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
}

TEST(BiasLayer, HandWorkedBiasFromSecondBottom) {
  Blob<double> x({2, 3, 2}), b({2, 3}), y;
  cpu_set(12, 1.0, x.mutable_cpu_data());
  SetValues(&b, {1, 2, 3, 4, 5, 6});
  BiasLayer<double> layer(BiasParam(0, 1));
  layer.SetUp({&x, &b}, {&y});
  EXPECT_TRUE(layer.blobs().empty());
  layer.Forward({&x, &b}, {&y});
  ExpectValues(y.cpu_data(), {2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7});
  for (int i = 0; i < 12; ++i) y.mutable_cpu_diff()[i] = i;
  for (int pass = 0; pass < 2; ++pass) {
    layer.Backward({&y}, {false, true}, {&x, &b});
    ExpectValues(b.cpu_diff(), {1, 5, 9, 13, 17, 21});  // written, not accumulated
  }
}

TEST(BiasLayer, GradientLearnedBias) {
  struct Case {
    int axis, num_axes;
  };
  for (Case c : {Case{1, 1}, Case{0, 2}, Case{1, -1}, Case{0, 0}, Case{-1, 1}}) {
    Blob<double> x({2, 3, 2, 2}), y;
    FillUniform(&x, -1.0, 1.0);
    BiasLayer<double> layer(BiasParam(c.axis, c.num_axes));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(BiasLayer, GradientBiasFromSecondBottom) {
  for (const std::vector<int>& shape : {std::vector<int>{3}, std::vector<int>{3, 2}}) {
    Blob<double> x({2, 3, 2}), b(shape), y;
    FillUniform(&x, -1.0, 1.0, 1);
    FillUniform(&b, -1.0, 1.0, 2);
    BiasLayer<double> layer(BiasParam(1, 1));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x, &b}, {&y});
  }
}

TEST(BiasLayer, InPlace) {
  Blob<double> x({2, 2});
  SetValues(&x, {1, 2, 3, 4});
  BiasLayer<double> layer(BiasParam(1, 1));
  layer.SetUp({&x}, {&x});
  SetValues(layer.blobs()[0].get(), {1, -1});
  cpu_set(2, 0.0, layer.blobs()[0]->mutable_cpu_diff());
  layer.Forward({&x}, {&x});
  ExpectValues(x.cpu_data(), {2, 1, 4, 3});
  SetValues(&x, {0, 0, 0, 0});
  for (int i = 0; i < 4; ++i) x.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&x}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {1, 2, 3, 4});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {4, 6});
}

TEST(BiasLayer, BadInputIsAnError) {
  Blob<float> x({2, 3, 4}), y, wrong({3, 5});
  EXPECT_THROW(BiasLayer<float>(BiasParam(1, -2)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(BiasLayer<float>(BiasParam(2, 2)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(BiasLayer<float>(BiasParam(1, 1)).SetUp({&x, &wrong}, {&y}), Error);
  BiasLayer<float> stored(BiasParam(1, 1));
  stored.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{4}));
  EXPECT_THROW(stored.SetUp({&x}, {&y}), Error);
}

}  // namespace
}  // namespace strata
