#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "blob_values.hpp"
#include "conv_cases.hpp"
#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/convolution_layer.hpp"
#include "strata/layers/deconvolution_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// A layer parameter of type `type` with the given convolution_param body (text format).
LayerParameter Param(const std::string& type, const std::string& conv_param) {
  LayerParameter p;
  ReadProtoFromTextString("name: \"l\" type: \"" + type + "\" convolution_param { " + conv_param + " }", &p);
  return p;
}

LayerParameter Deconv(const std::string& conv_param) { return Param("Deconvolution", conv_param); }

const char* kFillers = " weight_filler { type: \"gaussian\" std: 0.5 } bias_filler { type: \"uniform\" min: -1 max: 1 }";

TEST(DeconvolutionLayer, OutputAndWeightShapes) {
  // stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad: 2*4 + 3 - 2 = 9, 2*2 + 3 - 2 = 5.
  Blob<float> x({2, 4, 5, 3}), y;
  DeconvolutionLayer<float> layer(Deconv("num_output: 6 kernel_size: 3 stride: 2 pad: 1 group: 2"));
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 6, 9, 5}));
  // Caffe's layout: input channels x (num_output / group) x kernel.
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{4, 3, 3, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{6}));

  // Non-square kernel, stride and dilation: 1*(5-1) + 2*(3-1) + 1 = 9; 3*(3-1) + 1*(2-1) + 1 - 2 = 6.
  DeconvolutionLayer<float> odd(Deconv("num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 3 "
                                       "pad_h: 0 pad_w: 1 dilation: 2 dilation: 1 bias_term: false"));
  odd.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 2, 9, 6}));
  EXPECT_EQ(odd.blobs().size(), 1u);
  EXPECT_EQ(odd.blobs()[0]->shape(), (std::vector<int>{4, 2, 3, 2}));

  // Created by type name.
  auto made = LayerRegistry<float>::CreateLayer(Deconv("num_output: 1 kernel_size: 2"));
  EXPECT_STREQ(made->type(), "Deconvolution");
}

TEST(DeconvolutionLayer, HandWorkedStrideOne) {
  // x = [[1, 2], [3, 4]], kernel [[1, 0], [0, -1]], bias 0.5: every input pixel stamps the kernel at its place
  // in the 3 x 3 output, so y[p][q] = x[p][q] - x[p-1][q-1] (each where it exists) + 0.5.
  Blob<double> x({1, 1, 2, 2}), y;
  SetValues(&x, {1, 2, 3, 4});
  DeconvolutionLayer<double> layer(Deconv("num_output: 1 kernel_size: 2"));
  layer.SetUp({&x}, {&y});
  SetValues(layer.blobs()[0].get(), {1, 0, 0, -1});
  SetValues(layer.blobs()[1].get(), {0.5});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 3, 3}));
  ExpectValues(y.cpu_data(), {1.5, 2.5, 0.5, 3.5, 3.5, -1.5, 0.5, -2.5, -3.5});

  // Backward with dy = 1..9: dx[i][j] = sum_ab k[a][b] dy[i+a][j+b] = dy[i][j] - dy[i+1][j+1];
  // dW[a][b] = sum_ij x[i][j] dy[i+a][j+b]; db = sum dy.
  for (int i = 0; i < 9; ++i) y.mutable_cpu_diff()[i] = i + 1;
  for (auto& b : layer.blobs()) cpu_set(b->count(), 0.0, b->mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {1 - 5, 2 - 6, 4 - 8, 5 - 9});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {1 * 1 + 2 * 2 + 3 * 4 + 4 * 5, 1 * 2 + 2 * 3 + 3 * 5 + 4 * 6,
                                              1 * 4 + 2 * 5 + 3 * 7 + 4 * 8, 1 * 5 + 2 * 6 + 3 * 8 + 4 * 9});
  ExpectValues(layer.blobs()[1]->cpu_diff(), {45});
}

TEST(DeconvolutionLayer, HandWorkedStridePad) {
  // x = [[1, 2], [3, 4]], a 3 x 3 kernel of ones, stride 2, pad 1: the uncropped 5 x 5 output holds each pixel
  // over rows 2i..2i+2 and columns 2j..2j+2 (overlapping on row and column 2); pad 1 crops its border.
  Blob<double> x({1, 1, 2, 2}), y;
  SetValues(&x, {1, 2, 3, 4});
  DeconvolutionLayer<double> layer(Deconv("num_output: 1 kernel_size: 3 stride: 2 pad: 1 bias_term: false "
                                          "weight_filler { type: \"constant\" value: 1 }"));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 3, 3}));
  ExpectValues(y.cpu_data(), {1, 3, 2, 4, 10, 6, 3, 7, 4});
}

TEST(DeconvolutionLayer, HandWorkedGroups) {
  // Two groups of one channel each, 1x1 kernels: output channel o of group g is weight[g][o] * x[g].
  Blob<double> x({1, 2, 1, 2}), y;
  SetValues(&x, {1, 2, 10, 20});
  DeconvolutionLayer<double> layer(Deconv("num_output: 4 kernel_size: 1 group: 2 bias_term: false"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{2, 2, 1, 1}));
  SetValues(layer.blobs()[0].get(), {1, -1, 2, 3});
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {1, 2, -1, -2, 20, 40, 30, 60});
}

// FCN's up-sampling: one channel per group, a 4 x 4 bilinear kernel, stride 2, pad 1. The kernel is the outer
// product of [1/4, 3/4, 3/4, 1/4]; a constant image comes out constant inside, and 3/4 of it along the border
// (where one of the two overlapping taps falls outside the image).
TEST(DeconvolutionLayer, BilinearUpsampling) {
  Blob<double> x({1, 2, 3, 3}), y;
  for (int i = 0; i < 9; ++i) {
    x.mutable_cpu_data()[i] = 2;
    x.mutable_cpu_data()[9 + i] = -4;
  }
  DeconvolutionLayer<double> layer(Deconv("num_output: 2 group: 2 kernel_size: 4 stride: 2 pad: 1 "
                                          "bias_term: false weight_filler { type: \"bilinear\" }"));
  layer.SetUp({&x}, {&y});
  const std::vector<double> taps{0.25, 0.75, 0.75, 0.25};
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(layer.blobs()[0]->cpu_data()[c * 16 + i], taps[i / 4] * taps[i % 4]);
  }
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 2, 6, 6}));
  for (int c = 0; c < 2; ++c) {
    const double value = c == 0 ? 2 : -4;
    for (int h = 0; h < 6; ++h) {
      for (int w = 0; w < 6; ++w) {
        const double fh = (h == 0 || h == 5) ? 0.75 : 1, fw = (w == 0 || w == 5) ? 0.75 : 1;
        EXPECT_DOUBLE_EQ(y.data_at(0, c, h, w), value * fh * fw) << c << " " << h << " " << w;
      }
    }
  }
}

// The transpose relation with Convolution on the same weights (no bias): for conv: x -> y,
//   <conv(x), u> = <x, deconv(u)> for any u of y's shape,
// the deconvolution's bottom gradient for a top gradient v is conv(v), and its weight gradient for
// (bottom u, top gradient v) is the convolution's for (bottom v, top gradient u).
void CheckTranspose(const std::string& window, std::vector<int> x_shape) {
  SCOPED_TRACE(window);
  const int channels = x_shape[1];
  ConvolutionLayer<double> conv(Param("Convolution", "num_output: 6 bias_term: false " + window + kFillers));
  Blob<double> x(x_shape), cx, u, du;
  FillUniform(&x, -1.0, 1.0, 1);
  conv.SetUp({&x}, {&cx});
  u.ReshapeLike(cx);
  FillUniform(&u, -1.0, 1.0, 2);
  DeconvolutionLayer<double> deconv(
      Deconv("num_output: " + std::to_string(channels) + " bias_term: false " + window + kFillers));
  deconv.SetUp({&u}, {&du});
  ASSERT_EQ(du.shape(), x.shape()) << "the window must tile the input exactly for the shapes to match";
  ASSERT_EQ(deconv.blobs()[0]->shape(), conv.blobs()[0]->shape());
  deconv.blobs()[0]->CopyFrom(*conv.blobs()[0]);

  conv.Forward({&x}, {&cx});
  deconv.Forward({&u}, {&du});
  const double lhs = cpu_dot(cx.count(), cx.cpu_data(), u.cpu_data());
  const double rhs = cpu_dot(x.count(), x.cpu_data(), du.cpu_data());
  EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::fabs(lhs)));

  // Backward of the deconvolution with top gradient x: the bottom gradient is conv(x).
  cpu_copy(x.count(), x.cpu_data(), du.mutable_cpu_diff());
  cpu_set(deconv.blobs()[0]->count(), 0.0, deconv.blobs()[0]->mutable_cpu_diff());
  deconv.Backward({&du}, {true}, {&u});
  for (int i = 0; i < cx.count(); ++i) ASSERT_NEAR(u.cpu_diff()[i], cx.cpu_data()[i], 1e-12) << i;

  // The convolution's weight gradient for bottom x and top gradient u.
  cpu_copy(u.count(), u.cpu_data(), cx.mutable_cpu_diff());
  cpu_set(conv.blobs()[0]->count(), 0.0, conv.blobs()[0]->mutable_cpu_diff());
  conv.Backward({&cx}, {false}, {&x});
  for (int i = 0; i < conv.blobs()[0]->count(); ++i) {
    ASSERT_NEAR(deconv.blobs()[0]->cpu_diff()[i], conv.blobs()[0]->cpu_diff()[i], 1e-11) << i;
  }
}

TEST(DeconvolutionLayer, TransposeOfConvolution) {
  CheckTranspose("kernel_size: 3", {2, 4, 5, 6});
  CheckTranspose("kernel_size: 3 stride: 2 pad: 1", {2, 4, 7, 9});
  CheckTranspose("kernel_size: 3 stride: 2 pad: 2 dilation: 2 group: 2", {2, 4, 9, 7});
  CheckTranspose("kernel_h: 2 kernel_w: 3 stride_h: 2 stride_w: 1 pad_h: 0 pad_w: 1 group: 3", {1, 6, 6, 5});
  CheckTranspose("kernel_size: 1", {3, 2, 4, 4});
}

TEST(DeconvolutionLayer, Gradient) {
  const char* windows[] = {
      "num_output: 3 kernel_size: 3",
      "num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2",
      "num_output: 2 kernel_size: 2 stride: 2 dilation: 2 pad: 1",
      "num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 bias_term: false",
  };
  for (const char* w : windows) {
    SCOPED_TRACE(w);
    Blob<double> x({2, 2, 3, 4}), y;
    FillUniform(&x, -1.0, 1.0);
    DeconvolutionLayer<double> layer(Deconv(std::string(w) + kFillers));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(DeconvolutionLayer, GradientTwoBottomsAndAxis) {
  // Two bottoms share the weights; axis 2 makes the first two axes the batch.
  Blob<double> a({1, 2, 2, 3, 3}), b({1, 2, 2, 3, 3}), ya, yb;
  FillUniform(&a, -1.0, 1.0, 1);
  FillUniform(&b, -1.0, 1.0, 2);
  DeconvolutionLayer<double> layer(Deconv(std::string("num_output: 2 kernel_size: 2 stride: 2 axis: 2") + kFillers));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&a, &b}, {&ya, &yb});
  EXPECT_EQ(ya.shape(), (std::vector<int>{1, 2, 2, 6, 6}));
}

TEST(DeconvolutionLayer, BackwardAccumulatesParamsAndHonoursFlags) {
  Blob<double> x({2, 2, 3, 3}), y;
  FillUniform(&x, -1.0, 1.0);
  DeconvolutionLayer<double> layer(Deconv(std::string("num_output: 2 kernel_size: 3 stride: 2") + kFillers));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  FillUniform(&y, -1.0, 1.0, 3);
  cpu_copy(y.count(), y.cpu_data(), y.mutable_cpu_diff());
  auto& w = *layer.blobs()[0];
  auto& b = *layer.blobs()[1];
  cpu_set(w.count(), 0.0, w.mutable_cpu_diff());
  cpu_set(b.count(), 0.0, b.mutable_cpu_diff());
  cpu_set(x.count(), 7.0, x.mutable_cpu_diff());
  layer.Backward({&y}, {false}, {&x});
  for (int i = 0; i < x.count(); ++i) ASSERT_EQ(x.cpu_diff()[i], 7.0);  // not asked for: untouched
  const std::vector<double> dw1(w.cpu_diff(), w.cpu_diff() + w.count());
  const double db1 = b.cpu_diff()[1];
  layer.Backward({&y}, {false}, {&x});  // parameter gradients add up
  for (int i = 0; i < w.count(); ++i) EXPECT_DOUBLE_EQ(w.cpu_diff()[i], 2 * dw1[i]);
  EXPECT_DOUBLE_EQ(b.cpu_diff()[1], 2 * db1);
  layer.set_param_propagate_down(0, false);
  layer.set_param_propagate_down(1, false);
  layer.Backward({&y}, {true}, {&x});
  for (int i = 0; i < w.count(); ++i) EXPECT_DOUBLE_EQ(w.cpu_diff()[i], 2 * dw1[i]);
}

TEST(DeconvolutionLayer, BadConfigurationsAreRefused) {
  auto setup = [](const std::string& conv_param, const std::vector<int>& shape) {
    Blob<float> x(shape), y;
    DeconvolutionLayer<float> layer(Deconv(conv_param));
    layer.SetUp({&x}, {&y});
  };
  EXPECT_NO_THROW(setup("num_output: 2 kernel_size: 3", {1, 2, 4, 4}));
  EXPECT_THROW(setup("num_output: 2", {1, 2, 4, 4}), Error);                                  // no kernel
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3 stride: 0", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3 dilation: 0", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("kernel_size: 3", {1, 2, 4, 4}), Error);                                 // num_output 0
  EXPECT_THROW(setup("num_output: 3 kernel_size: 3 group: 2", {1, 2, 4, 4}), Error);          // 3 outputs, 2 groups
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3 group: 2", {1, 3, 4, 4}), Error);          // 3 inputs, 2 groups
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3 group: 0", {1, 2, 4, 4}), Error);
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3", {1, 2, 4, 4, 4}), Error);                // 3-D
  EXPECT_THROW(setup("num_output: 2 kernel_size: 3", {1, 2, 4}), Error);                      // 1-D
  EXPECT_THROW(setup("num_output: 2 kernel_size: 1 pad: 1", {1, 2, 1, 1}), Error);            // output 1 - 2 < 1
  EXPECT_THROW(setup("num_output: 2 kernel_size: 1 kernel_size: 1 kernel_size: 1", {1, 2, 3, 3}), Error);

  // Weights that came with the layer must fit.
  Blob<float> x({1, 2, 4, 4}), y;
  DeconvolutionLayer<float> wrong(Deconv("num_output: 2 kernel_size: 3"));
  wrong.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{2, 3, 3, 3}));  // needs 2 x 2 x 3 x 3
  wrong.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{2}));
  EXPECT_THROW(wrong.SetUp({&x}, {&y}), Error);

  // A later input with another channel count.
  DeconvolutionLayer<float> layer(Deconv("num_output: 2 kernel_size: 3"));
  layer.SetUp({&x}, {&y});
  x.Reshape({1, 3, 4, 4});
  EXPECT_THROW(layer.Reshape({&x}, {&y}), Error);
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(Deconvolution, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(DeconvolutionBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "deconv3x3" type: "Deconvolution" convolution_param { num_output: 5 kernel_size: 3 pad: 1
          )" + layer_engines::kFillers + R"( })", {{3, 4, 7, 6}}},
      {R"(name: "deconv_s2_g2_d2" type: "Deconvolution" convolution_param { num_output: 6 kernel_size: 3 stride: 2
          pad: 1 group: 2 dilation: 2 )" + layer_engines::kFillers + R"( })", {{2, 4, 5, 6}}},
      {R"(name: "deconv_nobias_2bottoms" type: "Deconvolution" convolution_param { num_output: 3 kernel_h: 3
          kernel_w: 2 stride_h: 1 stride_w: 2 bias_term: false weight_filler { type: "gaussian" std: 0.3 } })",
       {{2, 2, 4, 5}, {2, 2, 4, 5}}, 2},
      {R"(name: "deconv_bilinear" type: "Deconvolution" convolution_param { num_output: 3 group: 3 kernel_size: 4
          stride: 2 pad: 1 bias_term: false weight_filler { type: "bilinear" } })", {{2, 3, 5, 6}}},
      {R"(name: "deconv16" type: "Deconvolution" convolution_param { num_output: 16 kernel_size: 4 stride: 2
          pad: 1 )" + layer_engines::kFillers + R"( })", {{2, 32, 6, 5}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

// The random windows that leave an output, and FCN's up-sampling shapes (conv_cases.hpp), at 1 and 2 compute
// threads.
TYPED_TEST(DeconvolutionBesideCaffe, MatchesCaffeOnCpuOnRandomShapes) {
  conv_cases::ExpectWindowsMatchCaffeOnCpu<TypeParam>(conv_cases::RandomDeconvCases, 24, 80);
}

TYPED_TEST(DeconvolutionOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>({R"(name: "deconv" type: "Deconvolution" convolution_param {
      num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2 )" + layer_engines::kFillers + R"( })", {{2, 2, 3, 4}}});
  layer_engines::CheckGradient<TypeParam>({R"(name: "deconv_dilated" type: "Deconvolution" convolution_param {
      num_output: 2 kernel_size: 2 dilation: 2 )" + layer_engines::kFillers + R"( })", {{2, 3, 3, 3}}});
}

}  // namespace
}  // namespace strata
