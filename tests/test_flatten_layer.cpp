#include <gtest/gtest.h>

#include "gradient_checker.hpp"
#include "strata/layers/flatten_layer.hpp"

namespace strata {
namespace {

LayerParameter FlattenParam(int axis, int end_axis) {
  LayerParameter p;
  p.set_name("flatten");
  p.set_type("Flatten");
  p.mutable_flatten_param()->set_axis(axis);
  p.mutable_flatten_param()->set_end_axis(end_axis);
  return p;
}

std::vector<int> FlattenedShape(int axis, int end_axis) {
  Blob<float> x({2, 3, 4, 5}), y;
  FlattenLayer<float> layer(FlattenParam(axis, end_axis));
  layer.SetUp({&x}, {&y});
  return y.shape();
}

TEST(FlattenLayer, Shapes) {
  EXPECT_EQ(FlattenedShape(1, -1), (std::vector<int>{2, 60}));
  EXPECT_EQ(FlattenedShape(2, -1), (std::vector<int>{2, 3, 20}));
  EXPECT_EQ(FlattenedShape(1, 2), (std::vector<int>{2, 12, 5}));
  EXPECT_EQ(FlattenedShape(-3, -2), (std::vector<int>{2, 12, 5}));
  EXPECT_EQ(FlattenedShape(0, -1), (std::vector<int>{120}));
  EXPECT_EQ(FlattenedShape(2, 2), (std::vector<int>{2, 3, 4, 5}));
  // As in Caffe, axis just past end_axis flattens nothing into a new axis of 1.
  EXPECT_EQ(FlattenedShape(2, 1), (std::vector<int>{2, 3, 1, 4, 5}));
  LayerParameter defaults;
  defaults.set_type("Flatten");
  Blob<float> x({2, 3, 4, 5}), y;
  FlattenLayer<float> layer(defaults);
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 60}));
}

TEST(FlattenLayer, SharesDataAndDiff) {
  Blob<double> x({2, 3, 2}), y;
  FillUniform(&x, -1.0, 1.0);
  FlattenLayer<double> layer(FlattenParam(1, -1));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.cpu_data(), x.cpu_data());
  EXPECT_DOUBLE_EQ(y.data_at({1, 4}), x.data_at({1, 2, 0}));
  y.mutable_cpu_diff()[7] = 3.5;
  layer.Backward({&y}, {true}, {&x});
  EXPECT_EQ(x.cpu_diff()[7], 3.5);
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
  // A new bottom shape is followed.
  x.Reshape({4, 3, 2});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{4, 6}));
  EXPECT_EQ(y.cpu_data(), x.cpu_data());
}

TEST(FlattenLayer, Gradient) {
  Blob<double> x({2, 3, 2}), y;
  FillUniform(&x, -1.0, 1.0);
  FlattenLayer<double> layer(FlattenParam(0, 1));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(FlattenLayer, BadInputIsAnError) {
  Blob<float> x({2, 3, 4}), y;
  EXPECT_THROW(FlattenLayer<float>(FlattenParam(2, 0)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(FlattenLayer<float>(FlattenParam(3, -1)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(FlattenLayer<float>(FlattenParam(1, -1)).SetUp({&x}, {&x}), Error);
}

}  // namespace
}  // namespace strata
