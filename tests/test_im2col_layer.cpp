#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/im2col.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/im2col_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Im2col(const std::string& conv_param) {
  LayerParameter p;
  ReadProtoFromTextString("name: \"im2col\" type: \"Im2col\" convolution_param { " + conv_param + " }", &p);
  return p;
}

void FillIota(Blob<double>* b, double first = 0) {
  for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = first + i;
}

TEST(Im2colLayer, HandWorked) {
  // x = 1..9 in 3 x 3, 2 x 2 windows at stride 1: channel (i, j) holds x[oh + i][ow + j].
  Blob<double> x({1, 1, 3, 3}), y;
  FillIota(&x, 1);
  Im2colLayer<double> layer(Im2col("kernel_size: 2"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 4, 2, 2}));
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});

  // Backward sums each pixel's copies: with dy = 1 everywhere, the number of windows covering it.
  cpu_set(y.count(), 1.0, y.mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

TEST(Im2colLayer, HandWorkedPadStride) {
  // Pad 1, stride 2, 2 x 2 windows over 1..9: channel (i, j) at (oh, ow) reads x[2oh - 1 + i][2ow - 1 + j].
  Blob<double> x({1, 1, 3, 3}), y;
  FillIota(&x, 1);
  Im2colLayer<double> layer(Im2col("kernel_size: 2 pad: 1 stride: 2"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 4, 2, 2}));
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9});
}

TEST(Im2colLayer, MatchesIm2colPerImage) {
  // Two images of 3 channels, a non-square dilated window: each image's top is its column matrix.
  Blob<double> x({2, 3, 7, 6}), y;
  FillUniform(&x, -1.0, 1.0);
  Im2colLayer<double> layer(Im2col("kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2"));
  layer.SetUp({&x}, {&y});
  ConvGeometry g;
  g.channels = 3, g.height = 7, g.width = 6, g.kernel_h = 3, g.kernel_w = 2, g.stride_h = 2, g.stride_w = 1;
  g.pad_h = 1, g.pad_w = 2, g.dilation_h = 2, g.dilation_w = 2;
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 18, g.out_h(), g.out_w()}));
  layer.Forward({&x}, {&y});
  std::vector<double> col(18 * g.out_count());
  for (int n = 0; n < 2; ++n) {
    im2col_cpu(x.cpu_data() + n * 3 * 7 * 6, g, col.data());
    for (size_t i = 0; i < col.size(); ++i) ASSERT_EQ(y.cpu_data()[n * col.size() + i], col[i]) << n << " " << i;
  }
}

TEST(Im2colLayer, Gradient) {
  struct Case {
    const char* window;
    std::vector<int> shape;
  };
  const Case cases[] = {{"kernel_size: 3 pad: 1 stride: 2", {2, 2, 5, 6}},
                        {"kernel_h: 2 kernel_w: 3 dilation: 2", {2, 2, 5, 6}},
                        {"kernel_size: 2 axis: 2", {1, 2, 2, 4, 3}}};  // the first two axes are the batch
  for (const Case& c : cases) {
    SCOPED_TRACE(c.window);
    Blob<double> x(c.shape), y;
    FillUniform(&x, -1.0, 1.0);
    Im2colLayer<double> layer(Im2col(c.window));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(Im2colLayer, ReshapeFollowsTheInput) {
  Blob<double> x({1, 2, 4, 4}), y;
  Im2colLayer<double> layer(Im2col("kernel_size: 3"));
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{1, 18, 2, 2}));
  x.Reshape({3, 1, 5, 3});
  layer.Reshape({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{3, 9, 3, 1}));
}

TEST(Im2colLayer, BadConfigurationsAreRefused) {
  auto setup = [](const std::string& conv_param, const std::vector<int>& shape) {
    Blob<float> x(shape), y;
    auto layer = LayerRegistry<float>::CreateLayer(Im2col(conv_param));
    layer->SetUp({&x}, {&y});
  };
  EXPECT_NO_THROW(setup("kernel_size: 3", {1, 2, 4, 4}));
  EXPECT_THROW(setup("stride: 2", {1, 2, 4, 4}), Error);                         // no kernel
  EXPECT_THROW(setup("kernel_size: 3 kernel_h: 3 kernel_w: 3", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("kernel_h: 3", {1, 2, 4, 4}), Error);                       // kernel_w missing
  EXPECT_THROW(setup("kernel_size: 3 stride: 0", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("kernel_size: 5", {1, 2, 4, 4}), Error);                    // larger than the input
  EXPECT_THROW(setup("kernel_size: 3 dilation: 2", {1, 2, 4, 4}), Error);        // extent 5 > 4
  EXPECT_THROW(setup("kernel_size: 3", {1, 2, 4, 4, 4}), Error);                 // 3-D
  EXPECT_THROW(setup("kernel_size: 3", {2, 4}), Error);                          // no spatial axes
}

}  // namespace
}  // namespace strata
