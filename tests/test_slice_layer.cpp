#include <gtest/gtest.h>

#include "blob_values.hpp"
#include "data_test_util.hpp"
#include "gradient_checker.hpp"
#include "strata/layers/slice_layer.hpp"

namespace strata {
namespace {

LayerParameter SliceParam(int axis, std::vector<int> points) {
  LayerParameter p;
  p.set_name("slice");
  p.set_type("Slice");
  p.mutable_slice_param()->set_axis(axis);
  for (int s : points) p.mutable_slice_param()->add_slice_point(s);
  return p;
}

TEST(SliceLayer, HandWorkedAxis1WithSlicePoints) {
  Blob<double> x({2, 3, 2}), a, b;
  SetValues(&x, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  SliceLayer<double> layer(SliceParam(1, {1}));
  layer.SetUp({&x}, {&a, &b});
  layer.Forward({&x}, {&a, &b});
  ASSERT_EQ(a.shape(), (std::vector<int>{2, 1, 2}));
  ASSERT_EQ(b.shape(), (std::vector<int>{2, 2, 2}));
  ExpectValues(a.cpu_data(), {1, 2, 7, 8});
  ExpectValues(b.cpu_data(), {3, 4, 5, 6, 9, 10, 11, 12});
  // Backward puts each top's gradient back in its place.
  SetValues(&a, {-1, -2, -7, -8});
  std::copy(a.cpu_data(), a.cpu_data() + 4, a.mutable_cpu_diff());
  for (int i = 0; i < 8; ++i) b.mutable_cpu_diff()[i] = 100 + i;
  layer.Backward({&a, &b}, {true}, {&x});
  const double expected[] = {-1, -2, 100, 101, 102, 103, -7, -8, 104, 105, 106, 107};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(x.cpu_diff()[i], expected[i]) << i;
}

TEST(SliceLayer, EqualPiecesAndLegacySliceDim) {
  Blob<double> x({4, 3}), a, b;
  SetValues(&x, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  LayerParameter p = SliceParam(0, {});
  p.mutable_slice_param()->clear_axis();
  p.mutable_slice_param()->set_slice_dim(0);
  SliceLayer<double> layer(p);
  layer.SetUp({&x}, {&a, &b});
  layer.Forward({&x}, {&a, &b});
  ExpectValues(a.cpu_data(), {1, 2, 3, 4, 5, 6});
  ExpectValues(b.cpu_data(), {7, 8, 9, 10, 11, 12});
}

TEST(SliceLayer, Gradient) {
  Blob<double> x({2, 5, 3, 2}), a, b, c;
  FillUniform(&x, -1.0, 1.0);
  SliceLayer<double> layer(SliceParam(1, {1, 3}));
  GradientChecker<double> checker;
  checker.CheckGradient(&layer, {&x}, {&a, &b, &c});
  EXPECT_EQ(b.shape(), (std::vector<int>{2, 2, 3, 2}));
}

TEST(SliceLayer, BadParametersAreErrors) {
  using testing_data::ExpectErrorContaining;
  Blob<float> x({2, 5}), a, b;
  ExpectErrorContaining([&] { SliceLayer<float>(SliceParam(1, {})).SetUp({&x}, {&a, &b}); }, {"equal pieces"});
  ExpectErrorContaining([&] { SliceLayer<float>(SliceParam(1, {3, 2})).SetUp({&x}, {&a, &b}); },
                        {"slice_points"});
  ExpectErrorContaining([&] { SliceLayer<float>(SliceParam(1, {5})).SetUp({&x}, {&a, &b}); }, {"increase"});
}

}  // namespace
}  // namespace strata
