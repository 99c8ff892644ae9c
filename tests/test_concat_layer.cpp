#include <gtest/gtest.h>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layers/concat_layer.hpp"

namespace strata {
namespace {

LayerParameter ConcatParam(int axis) {
  LayerParameter p;
  p.set_name("concat");
  p.set_type("Concat");
  p.mutable_concat_param()->set_axis(axis);
  return p;
}

TEST(ConcatLayer, HandWorkedAxis1) {
  Blob<double> a({2, 1, 2}), b({2, 2, 2}), y;
  SetValues(&a, {1, 2, 3, 4});
  SetValues(&b, {5, 6, 7, 8, 9, 10, 11, 12});
  ConcatLayer<double> layer(ConcatParam(1));
  layer.SetUp({&a, &b}, {&y});
  layer.Forward({&a, &b}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 3, 2}));
  const double expected[] = {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(y.cpu_data()[i], expected[i]) << i;

  // Backward hands each bottom its slice, and only to the bottoms that ask.
  for (int i = 0; i < 12; ++i) y.mutable_cpu_diff()[i] = 100 + i;
  cpu_set(a.count(), -1.0, a.mutable_cpu_diff());
  layer.Backward({&y}, {false, true}, {&a, &b});
  const double expected_b[] = {102, 103, 104, 105, 108, 109, 110, 111};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.cpu_diff()[i], expected_b[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.cpu_diff()[i], -1) << i;
}

TEST(ConcatLayer, HandWorkedAxis0AndNegativeAxis) {
  Blob<double> a({1, 2}), b({2, 2}), y;
  SetValues(&a, {1, 2});
  SetValues(&b, {3, 4, 5, 6});
  ConcatLayer<double> layer(ConcatParam(0));
  layer.SetUp({&a, &b}, {&y});
  layer.Forward({&a, &b}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.cpu_data()[i], i + 1);

  Blob<double> c({2, 1}), z;
  SetValues(&c, {7, 8});
  ConcatLayer<double> last(ConcatParam(-1));
  last.SetUp({&b, &c}, {&z});
  last.Forward({&b, &c}, {&z});
  ASSERT_EQ(z.shape(), (std::vector<int>{2, 3}));
  const double expected[] = {3, 4, 7, 5, 6, 8};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z.cpu_data()[i], expected[i]);
}

TEST(ConcatLayer, LegacyConcatDim) {
  Blob<float> a({2, 3, 4}), b({5, 3, 4}), y;
  LayerParameter p;
  p.set_type("Concat");
  p.mutable_concat_param()->set_concat_dim(0);
  ConcatLayer<float> layer(p);
  layer.SetUp({&a, &b}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{7, 3, 4}));

  p.mutable_concat_param()->set_axis(0);
  ConcatLayer<float> both(p);
  EXPECT_THROW(both.SetUp({&a, &b}, {&y}), Error);

  p.clear_concat_param();
  p.mutable_concat_param()->set_concat_dim(3);
  ConcatLayer<float> out_of_range(p);
  EXPECT_THROW(out_of_range.SetUp({&a, &b}, {&y}), Error);
}

TEST(ConcatLayer, MismatchedShapesAreErrors) {
  Blob<float> a({2, 3, 4}), b({2, 5, 4}), c({2, 3, 5}), d({2, 3}), y;
  ConcatLayer<float> layer(ConcatParam(1));
  layer.SetUp({&a, &b}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 8, 4}));
  EXPECT_THROW(ConcatLayer<float>(ConcatParam(1)).SetUp({&a, &c}, {&y}), Error);
  EXPECT_THROW(ConcatLayer<float>(ConcatParam(1)).SetUp({&a, &d}, {&y}), Error);
  EXPECT_THROW(ConcatLayer<float>(ConcatParam(3)).SetUp({&a, &b}, {&y}), Error);
}

TEST(ConcatLayer, SingleBottomSharesMemory) {
  Blob<float> a({2, 3}), y;
  ConcatLayer<float> layer(ConcatParam(1));
  layer.SetUp({&a}, {&y});
  layer.Forward({&a}, {&y});
  EXPECT_EQ(y.shape(), a.shape());
  EXPECT_EQ(y.cpu_data(), a.cpu_data());
  EXPECT_EQ(y.cpu_diff(), a.cpu_diff());
}

TEST(ConcatLayer, GradientAxis0) {
  Blob<double> a({1, 3, 2}), b({2, 3, 2}), y;
  FillUniform(&a, -1.0, 1.0, 1);
  FillUniform(&b, -1.0, 1.0, 2);
  ConcatLayer<double> layer(ConcatParam(0));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&a, &b}, {&y});
}

TEST(ConcatLayer, GradientAxis1) {
  Blob<double> a({2, 1, 2, 3}), b({2, 2, 2, 3}), c({2, 3, 2, 3}), y;
  FillUniform(&a, -1.0, 1.0, 1);
  FillUniform(&b, -1.0, 1.0, 2);
  FillUniform(&c, -1.0, 1.0, 3);
  ConcatLayer<double> layer(ConcatParam(1));
  GradientChecker<double> checker(1e-4, 1e-6);
  for (int check = 0; check < 3; ++check) checker.CheckGradient(&layer, {&a, &b, &c}, {&y}, check);
}

TEST(ConcatLayer, LargeCopiesMatchSmall) {
  // Big enough for the threaded copy, with rows split into pieces.
  Blob<float> a({2, 3, 100, 128}), b({2, 1, 100, 128}), y;
  FillUniform(&a, -1.0f, 1.0f, 1);
  FillUniform(&b, -1.0f, 1.0f, 2);
  ConcatLayer<float> layer(ConcatParam(1));
  layer.SetUp({&a, &b}, {&y});
  layer.Forward({&a, &b}, {&y});
  const int inner = 100 * 128;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 3 * inner; ++i) ASSERT_EQ(y.cpu_data()[n * 4 * inner + i], a.cpu_data()[n * 3 * inner + i]);
    for (int i = 0; i < inner; ++i) ASSERT_EQ(y.cpu_data()[n * 4 * inner + 3 * inner + i], b.cpu_data()[n * inner + i]);
  }
  cpu_copy(y.count(), y.cpu_data(), y.mutable_cpu_diff());
  layer.Backward({&y}, {true, true}, {&a, &b});
  for (int i = 0; i < a.count(); ++i) ASSERT_EQ(a.cpu_diff()[i], a.cpu_data()[i]);
  for (int i = 0; i < b.count(); ++i) ASSERT_EQ(b.cpu_diff()[i], b.cpu_data()[i]);
}

}  // namespace
}  // namespace strata
