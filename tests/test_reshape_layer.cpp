#include <gtest/gtest.h>

#include "gradient_checker.hpp"
#include "strata/layers/reshape_layer.hpp"

namespace strata {
namespace {

LayerParameter ReshapeParam(std::vector<long long> dims, int axis = 0, int num_axes = -1) {
  LayerParameter p;
  p.set_name("reshape");
  p.set_type("Reshape");
  for (long long d : dims) p.mutable_reshape_param()->mutable_shape()->add_dim(d);
  p.mutable_reshape_param()->set_axis(axis);
  p.mutable_reshape_param()->set_num_axes(num_axes);
  return p;
}

// The top shape for a (2, 3, 6, 5) bottom (180 values).
std::vector<int> Reshaped(std::vector<long long> dims, int axis = 0, int num_axes = -1) {
  Blob<float> x({2, 3, 6, 5}), y;
  ReshapeLayer<float> layer(ReshapeParam(dims, axis, num_axes));
  layer.SetUp({&x}, {&y});
  return y.shape();
}

TEST(ReshapeLayer, ExplicitShape) {
  EXPECT_EQ(Reshaped({6, 2, 15}), (std::vector<int>{6, 2, 15}));
  EXPECT_EQ(Reshaped({180}), (std::vector<int>{180}));
}

TEST(ReshapeLayer, CopyAndInfer) {
  EXPECT_EQ(Reshaped({0, -1}), (std::vector<int>{2, 90}));
  EXPECT_EQ(Reshaped({0, 0, -1}), (std::vector<int>{2, 3, 30}));
  EXPECT_EQ(Reshaped({-1, 0, 0, 0}), (std::vector<int>{2, 3, 6, 5}));
  EXPECT_EQ(Reshaped({0, -1, 5}), (std::vector<int>{2, 18, 5}));
  EXPECT_EQ(Reshaped({-1}), (std::vector<int>{180}));
  EXPECT_EQ(Reshaped({3, -1, 0, 0}), (std::vector<int>{3, 2, 6, 5}));  // 0 copies the bottom's axis at its place
}

TEST(ReshapeLayer, AxisAndNumAxesReplaceARange) {
  // Insert singleton axes: at the front, in the middle, at the end (axis -1 is after the last axis).
  EXPECT_EQ(Reshaped({1}, 0, 0), (std::vector<int>{1, 2, 3, 6, 5}));
  EXPECT_EQ(Reshaped({1, 1, 1}, 2, 0), (std::vector<int>{2, 3, 1, 1, 1, 6, 5}));
  EXPECT_EQ(Reshaped({1}, -1, 0), (std::vector<int>{2, 3, 6, 5, 1}));
  // Replace axes 1 and 2 with one inferred axis; replace the last with (5, 1); replace axes 1.. with (0, -1).
  EXPECT_EQ(Reshaped({-1}, 1, 2), (std::vector<int>{2, 18, 5}));
  EXPECT_EQ(Reshaped({5, 1}, -2, 1), (std::vector<int>{2, 3, 6, 5, 1}));
  EXPECT_EQ(Reshaped({0, -1}, 1), (std::vector<int>{2, 3, 30}));
  EXPECT_EQ(Reshaped({2, 3}, 2, 1), (std::vector<int>{2, 3, 2, 3, 5}));
  // An empty shape with num_axes 1 removes an axis of size 1.
  Blob<float> x({2, 1, 3}), y;
  ReshapeLayer<float> squeeze(ReshapeParam({}, 1, 1));
  squeeze.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3}));
}

TEST(ReshapeLayer, SharesDataAndFollowsTheBottom) {
  Blob<double> x({2, 3, 4}), y;
  FillUniform(&x, -1.0, 1.0);
  ReshapeLayer<double> layer(ReshapeParam({0, -1, 2}));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 6, 2}));
  EXPECT_EQ(y.cpu_data(), x.cpu_data());
  EXPECT_EQ(y.cpu_diff(), x.cpu_diff());
  x.Reshape({5, 3, 4});
  layer.Forward({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{5, 6, 2}));
  EXPECT_EQ(y.cpu_data(), x.cpu_data());
}

TEST(ReshapeLayer, Gradient) {
  Blob<double> x({2, 3, 2}), y;
  FillUniform(&x, -1.0, 1.0);
  ReshapeLayer<double> layer(ReshapeParam({-1, 2}, 1));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 2}));
}

TEST(ReshapeLayer, BadInputIsAnError) {
  EXPECT_THROW(Reshaped({-1, -1}), Error);             // two inferred dimensions
  EXPECT_THROW(Reshaped({4, 50}), Error);              // 200 values, not 180
  EXPECT_THROW(Reshaped({7, -1}), Error);              // 180 is not a multiple of 7
  EXPECT_THROW(Reshaped({0, 0, 0, 0, 0}), Error);      // no fifth axis to copy
  EXPECT_THROW(Reshaped({0}, 1, 0), Error);            // copying axis 1 doubles the count
  EXPECT_THROW(Reshaped({2, -2}), Error);              // negative dimension
  EXPECT_THROW(Reshaped({1}, 5, 0), Error);            // axis out of range
  EXPECT_THROW(Reshaped({1}, -6, 0), Error);
  EXPECT_THROW(Reshaped({-1}, 1, 4), Error);           // range past the last axis
  EXPECT_THROW(Reshaped({-1}, 1, -2), Error);
  EXPECT_THROW(Reshaped({1LL << 32}), Error);
  Blob<float> x({2, 3}), empty({0, 3}), y;
  EXPECT_THROW(ReshapeLayer<float>(ReshapeParam({-1})).SetUp({&x}, {&x}), Error);  // in place
  EXPECT_THROW(ReshapeLayer<float>(ReshapeParam({0, 2, -1})).SetUp({&empty}, {&y}), Error);
}

}  // namespace
}  // namespace strata
