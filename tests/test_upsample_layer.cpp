#include <gtest/gtest.h>

#include "gradient_checker.hpp"
#include "strata/layers/upsample_layer.hpp"

namespace strata {
namespace {

LayerParameter UpsampleParam() {
  LayerParameter p;
  p.set_name("up");
  p.set_type("Upsample");
  return p;
}

TEST(UpsampleLayer, HandWorkedForwardBackward) {
  // Two planes of 2 x 3; each value becomes a 2 x 2 block of a 4 x 6 plane.
  Blob<float> x({1, 2, 2, 3}), y;
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = static_cast<float>(i + 1);
  UpsampleLayer<float> layer(UpsampleParam());
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{1, 2, 4, 6}));
  layer.Forward({&x}, {&y});
  const float plane0[4][6] = {{1, 1, 2, 2, 3, 3}, {1, 1, 2, 2, 3, 3}, {4, 4, 5, 5, 6, 6}, {4, 4, 5, 5, 6, 6}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      EXPECT_EQ(y.data_at(0, 0, i, j), plane0[i][j]) << i << "," << j;
      EXPECT_EQ(y.data_at(0, 1, i, j), plane0[i][j] + 6) << i << "," << j;
    }
  // Gradient of the output position (i, j) is 10 i + j: each input gathers its block's four.
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) y.mutable_cpu_diff()[y.offset(0, c, i, j)] = static_cast<float>(10 * i + j + c);
  layer.Backward({&y}, {true}, {&x});
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        const float expected = 10 * (2 * i) * 2 + 10 * (2 * i + 1) * 2 + (2 * j) * 2 + (2 * j + 1) * 2 + 4 * c;
        EXPECT_EQ(x.diff_at(0, c, i, j), expected) << c << "," << i << "," << j;
      }
}

TEST(UpsampleLayer, Gradient) {
  Blob<double> x({2, 3, 3, 4}), y;
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = 0.1 * (i % 7) - 0.3;
  UpsampleLayer<double> layer(UpsampleParam());
  layer.SetUp({&x}, {&y});
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(UpsampleLayer, RejectsBadInput) {
  Blob<float> flat({2, 6}), y;
  UpsampleLayer<float> layer(UpsampleParam());
  EXPECT_THROW(layer.SetUp({&flat}, {&y}), Error);
  Blob<float> x({1, 1, 2, 2});
  UpsampleLayer<float> in_place(UpsampleParam());
  EXPECT_THROW(in_place.SetUp({&x}, {&x}), Error);
}

}  // namespace
}  // namespace strata
