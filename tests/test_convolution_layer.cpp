#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "conv_cases.hpp"
#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/convolution_layer.hpp"
#include "strata/parallel.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

struct ConvOptions {
  int num_output = 3;
  int kernel = 3, stride = 1, pad = 0, dilation = 1, group = 1;
  bool bias = true;
};

LayerParameter ConvParam(const ConvOptions& o) {
  LayerParameter p;
  p.set_name("conv");
  p.set_type("Convolution");
  auto* c = p.mutable_convolution_param();
  c->set_num_output(o.num_output);
  c->add_kernel_size(o.kernel);
  if (o.stride != 1) c->add_stride(o.stride);
  if (o.pad != 0) c->add_pad(o.pad);
  if (o.dilation != 1) c->add_dilation(o.dilation);
  c->set_group(o.group);
  c->set_bias_term(o.bias);
  c->mutable_weight_filler()->set_type("gaussian");
  c->mutable_bias_filler()->set_type("uniform");
  c->mutable_bias_filler()->set_min(-1);
  return p;
}

// A straightforward convolution over N x C x H x W, for checking the batched GEMM path on sizes a gradient
// check cannot afford. Returns y; with dy given, also dx and dw (accumulated into zeroed vectors).
struct Reference {
  int N, C, H, W, O, G, kh, kw, sh, sw, ph, pw, dh, dw_;
  int OH() const { return (H + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1; }
  int OW() const { return (W + 2 * pw - (dw_ * (kw - 1) + 1)) / sw + 1; }
  template <typename F>
  void Visit(F f) const {  // f(x index, w index, y index) for every product term
    const int Cg = C / G, Og = O / G;
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o)
        for (int oh = 0; oh < OH(); ++oh)
          for (int ow = 0; ow < OW(); ++ow)
            for (int c = 0; c < Cg; ++c)
              for (int i = 0; i < kh; ++i)
                for (int j = 0; j < kw; ++j) {
                  const int ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw_;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int cin = (o / Og) * Cg + c;
                  f(((n * C + cin) * H + ih) * W + iw, ((o * Cg + c) * kh + i) * kw + j,
                    ((n * O + o) * OH() + oh) * OW() + ow);
                }
  }
};

TEST(ConvolutionLayer, OutputShape) {
  Blob<float> x({2, 3, 7, 5}), y;
  ConvolutionLayer<float> layer(ConvParam({4, 3, 2, 1, 1, 1, true}));  // stride 2, pad 1
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 4, 4, 3}));  // (7+2-3)/2+1, (5+2-3)/2+1
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{4, 3, 3, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{4}));

  ConvolutionLayer<float> dilated(ConvParam({6, 3, 1, 0, 2, 3, true}));  // dilation 2, 3 groups
  dilated.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 6, 3, 1}));  // extent 5: (7-5)/1+1, (5-5)/1+1
  EXPECT_EQ(dilated.blobs()[0]->shape(), (std::vector<int>{6, 1, 3, 3}));
}

TEST(ConvolutionLayer, HandWorkedPadStride) {
  // x = 1..9 in a 3x3 image, kernel [[1, 0], [0, -1]], bias 0.5, pad 1, stride 2: output 2x2, each window's
  // top-left minus bottom-right pixel (0 in the padding).
  Blob<double> x({1, 1, 3, 3}), y;
  for (int i = 0; i < 9; ++i) x.mutable_cpu_data()[i] = i + 1;
  ConvOptions o;
  o.num_output = 1;
  o.kernel = 2;
  o.stride = 2;
  o.pad = 1;
  ConvolutionLayer<double> layer(ConvParam(o));
  layer.SetUp({&x}, {&y});
  const double w[] = {1, 0, 0, -1};
  std::copy(w, w + 4, layer.blobs()[0]->mutable_cpu_data());
  layer.blobs()[1]->mutable_cpu_data()[0] = 0.5;
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 0 - 1 + 0.5);  // window rows -1..0, cols -1..0
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], 0 - 3 + 0.5);  // rows -1..0, cols 1..2
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], 0 - 7 + 0.5);  // rows 1..2, cols -1..0
  EXPECT_DOUBLE_EQ(y.cpu_data()[3], 5 - 9 + 0.5);  // rows 1..2, cols 1..2
}

TEST(ConvolutionLayer, HandWorkedGroupDilation) {
  // Two images, two channels (1..9 and 10..18, the second image negated), two groups, a 2x2 kernel dilated by
  // 2: each output reads the four corners of its own channel.
  Blob<double> x({2, 2, 3, 3}), y;
  for (int i = 0; i < 18; ++i) {
    x.mutable_cpu_data()[i] = i + 1;
    x.mutable_cpu_data()[18 + i] = -(i + 1);
  }
  ConvOptions o;
  o.num_output = 2;
  o.kernel = 2;
  o.dilation = 2;
  o.group = 2;
  o.bias = false;
  ConvolutionLayer<double> layer(ConvParam(o));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 1u);
  const double w[] = {1, 1, 1, 1, 1, 0, 0, -1};
  std::copy(w, w + 8, layer.blobs()[0]->mutable_cpu_data());
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_DOUBLE_EQ(y.cpu_data()[0], 1 + 3 + 7 + 9);
  EXPECT_DOUBLE_EQ(y.cpu_data()[1], 10 - 18);
  EXPECT_DOUBLE_EQ(y.cpu_data()[2], -20);
  EXPECT_DOUBLE_EQ(y.cpu_data()[3], 8);
}

void CheckConvGradient(const LayerParameter& param, const std::vector<int>& shape) {
  Blob<double> x(shape), y;
  FillUniform(&x, -1.0, 1.0);
  ConvolutionLayer<double> layer(param);
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x}, {&y});
}

TEST(ConvolutionLayer, Gradient) {
  struct Case {
    const char* what;
    ConvOptions o;  // num_output, kernel, stride, pad, dilation, group, bias
    std::vector<int> shape;
  };
  const Case cases[] = {
      {"pad and stride", {4, 3, 2, 1, 1, 1, true}, {2, 3, 5, 6}},
      {"dilation", {2, 3, 1, 2, 2, 1, true}, {2, 2, 5, 6}},
      {"two groups", {4, 3, 1, 1, 1, 2, true}, {2, 4, 4, 5}},
      {"no bias", {3, 2, 1, 0, 1, 1, false}, {2, 2, 4, 4}},
      {"1x1, small images gathered into one GEMM", {4, 1, 1, 0, 1, 2, true}, {3, 2, 3, 4}},
      {"1x1, large enough to multiply the input directly", {2, 1, 1, 0, 1, 1, true}, {2, 2, 16, 16}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    CheckConvGradient(ConvParam(c.o), c.shape);
  }
}

TEST(ConvolutionLayer, GradientNonSquare) {
  LayerParameter p = ConvParam(ConvOptions());
  auto* c = p.mutable_convolution_param();
  c->clear_kernel_size();
  c->set_kernel_h(3);
  c->set_kernel_w(2);
  c->set_stride_h(2);
  c->set_stride_w(1);
  c->set_pad_h(1);
  c->set_pad_w(0);
  c->add_dilation(1);
  c->add_dilation(2);
  CheckConvGradient(p, {1, 2, 5, 6});  // one image: the GEMM writes straight into the top
  Blob<double> x({1, 2, 5, 6}), y;
  ConvolutionLayer<double> layer(p);
  layer.SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{1, 3, 3, 4}));  // (5+2-3)/2+1, (6-3)/1+1
}

TEST(ConvolutionLayer, GradientTwoBottomsAndAxis) {
  // Two bottoms share the weights; the channel axis is 2 of a 5-D blob (the first two axes are images).
  LayerParameter p = ConvParam(ConvOptions());
  p.mutable_convolution_param()->set_axis(2);
  p.mutable_convolution_param()->add_pad(1);
  Blob<double> a({1, 2, 2, 3, 3}), b({1, 2, 2, 3, 3}), ya, yb;
  FillUniform(&a, -1.0, 1.0, 1);
  FillUniform(&b, -1.0, 1.0, 2);
  ConvolutionLayer<double> layer(p);
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&a, &b}, {&ya, &yb});
  EXPECT_EQ(ya.shape(), (std::vector<int>{1, 2, 3, 3, 3}));
}

// Forward and backward of `r` (pad 1) against a direct convolution in double.
void CheckAgainstReference(const Reference& r) {
  LayerParameter p = ConvParam(ConvOptions());
  p.mutable_convolution_param()->set_num_output(r.O);
  p.mutable_convolution_param()->set_group(r.G);
  p.mutable_convolution_param()->add_pad(1);
  Blob<float> x({r.N, r.C, r.H, r.W}), y;
  FillUniform(&x, -1.0f, 1.0f);
  ConvolutionLayer<float> layer(p);
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  FillUniform(&y, -1.0f, 1.0f, 7);  // the top gradient
  std::copy(y.cpu_data(), y.cpu_data() + y.count(), y.mutable_cpu_diff());
  layer.Forward({&x}, {&y});
  cpu_set(layer.blobs()[0]->count(), 0.f, layer.blobs()[0]->mutable_cpu_diff());
  cpu_set(layer.blobs()[1]->count(), 0.f, layer.blobs()[1]->mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});

  const float* w = layer.blobs()[0]->cpu_data();
  const float* xd = x.cpu_data();
  const float* dy = y.cpu_diff();
  std::vector<double> ref_y(y.count()), ref_dx(x.count()), ref_dw(layer.blobs()[0]->count()), ref_db(r.O);
  const int per_out = r.OH() * r.OW();
  for (int i = 0; i < y.count(); ++i) {
    ref_y[i] = layer.blobs()[1]->cpu_data()[(i / per_out) % r.O];
    ref_db[(i / per_out) % r.O] += dy[i];
  }
  r.Visit([&](int xi, int wi, int yi) {
    ref_y[yi] += double(w[wi]) * xd[xi];
    ref_dx[xi] += double(w[wi]) * dy[yi];
    ref_dw[wi] += double(xd[xi]) * dy[yi];
  });
  for (int i = 0; i < y.count(); ++i) ASSERT_NEAR(y.cpu_data()[i], ref_y[i], 1e-4) << i;
  for (int i = 0; i < x.count(); ++i) ASSERT_NEAR(x.cpu_diff()[i], ref_dx[i], 1e-4) << i;
  for (int i = 0; i < r.O; ++i) ASSERT_NEAR(layer.blobs()[1]->cpu_diff()[i], ref_db[i], 1e-4 * r.N * per_out);
  for (size_t i = 0; i < ref_dw.size(); ++i) {
    ASSERT_NEAR(layer.blobs()[0]->cpu_diff()[i], ref_dw[i], 1e-5 * r.N * per_out) << i;
  }
}

TEST(ConvolutionLayer, ChunkedBatchMatchesReference) {
  // Images with small outputs (8x8) go several to a GEMM (with a short last chunk).
  CheckAgainstReference({4, 8, 8, 8, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1});  // chunks of 3 and 1
}

TEST(ConvolutionLayer, ThreadsShareTheBatch) {
  // Two compute threads, each with its own range of 9 images (chunks of 3), their parameter gradients added
  // afterwards; and a batch of one, where the GEMMs themselves are split between the threads.
  const int saved = compute_threads();
  set_compute_threads(2);
  CheckAgainstReference({18, 8, 8, 8, 8, 2, 3, 3, 1, 1, 1, 1, 1, 1});
  CheckAgainstReference({1, 16, 40, 40, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1});
  set_compute_threads(saved);
}

TEST(ConvolutionLayer, BackwardAccumulatesParamsAndHonoursFlags) {
  ConvOptions o;
  o.pad = 1;
  Blob<double> x({2, 2, 4, 4}), y;
  FillUniform(&x, -1.0, 1.0);
  ConvolutionLayer<double> layer(ConvParam(o));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  FillUniform(&y, -1.0, 1.0, 3);
  std::copy(y.cpu_data(), y.cpu_data() + y.count(), y.mutable_cpu_diff());
  auto& w = *layer.blobs()[0];
  auto& b = *layer.blobs()[1];
  cpu_set(w.count(), 0.0, w.mutable_cpu_diff());
  cpu_set(b.count(), 0.0, b.mutable_cpu_diff());
  layer.Backward({&y}, {false}, {&x});
  const std::vector<double> dw1(w.cpu_diff(), w.cpu_diff() + w.count());
  const double db1 = b.cpu_diff()[0];
  layer.Backward({&y}, {false}, {&x});  // parameter gradients add up
  for (int i = 0; i < w.count(); ++i) EXPECT_DOUBLE_EQ(w.cpu_diff()[i], 2 * dw1[i]);
  EXPECT_DOUBLE_EQ(b.cpu_diff()[0], 2 * db1);

  layer.set_param_propagate_down(0, false);
  layer.set_param_propagate_down(1, false);
  cpu_set(x.count(), 7.0, x.mutable_cpu_diff());
  layer.Backward({&y}, {false}, {&x});  // nothing to do
  for (int i = 0; i < w.count(); ++i) EXPECT_DOUBLE_EQ(w.cpu_diff()[i], 2 * dw1[i]);
  EXPECT_DOUBLE_EQ(x.cpu_diff()[0], 7.0);
}

TEST(ConvolutionLayer, CaffePrototxt) {
  // AlexNet's conv2, as Caffe writes it.
  LayerParameter p;
  ReadProtoFromTextString(R"(
    name: "conv2" type: "Convolution" bottom: "norm1" top: "conv2"
    param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    convolution_param {
      num_output: 256 pad: 2 kernel_size: 5 group: 2
      weight_filler { type: "gaussian" std: 0.01 }
      bias_filler { type: "constant" value: 0.1 }
    })", &p);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "Convolution");
  Blob<float> x({1, 96, 27, 27}), y;
  layer->SetUp({&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{1, 256, 27, 27}));
  EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{256, 48, 5, 5}));
  EXPECT_FLOAT_EQ(layer->blobs()[1]->cpu_data()[0], 0.1f);
}

TEST(ConvolutionLayer, BadParametersAreErrors) {
  auto setup = [](const LayerParameter& p, const std::vector<int>& shape) {
    Blob<float> x(shape), y;
    ConvolutionLayer<float> layer(p);
    layer.SetUp({&x}, {&y});
  };
  const ConvOptions o;
  EXPECT_NO_THROW(setup(ConvParam(o), {1, 2, 5, 5}));
  LayerParameter p = ConvParam(o);
  p.mutable_convolution_param()->clear_kernel_size();
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);  // no kernel size
  p = ConvParam(o);
  p.mutable_convolution_param()->set_kernel_h(3);
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);  // kernel_size and kernel_h
  p = ConvParam(o);
  p.mutable_convolution_param()->set_num_output(0);
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);
  p = ConvParam(o);
  p.mutable_convolution_param()->set_group(2);
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);  // 3 outputs in 2 groups
  EXPECT_THROW(setup(p, {1, 3, 5, 5}), Error);  // 3 channels in 2 groups
  p = ConvParam(o);
  p.mutable_convolution_param()->add_stride(0);
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);
  EXPECT_THROW(setup(ConvParam(o), {1, 2, 5, 5, 5}), Error);  // 3-D convolution
  EXPECT_THROW(setup(ConvParam(o), {1, 2, 5}), Error);        // 1-D
  EXPECT_THROW(setup(ConvParam(o), {1, 2, 2, 5}), Error);     // kernel larger than the input

  // Weights from a model file must fit.
  p = ConvParam(o);
  BlobProto* w = p.add_blobs();
  for (int d : {3, 2, 3, 2}) w->mutable_shape()->add_dim(d);
  w->mutable_data()->Resize(36, 0.f);
  BlobProto* b = p.add_blobs();
  b->mutable_shape()->add_dim(3);
  b->mutable_data()->Resize(3, 0.f);
  EXPECT_THROW(setup(p, {1, 2, 5, 5}), Error);

  // The channel count may not change after setup.
  Blob<float> x({1, 2, 5, 5}), y;
  ConvolutionLayer<float> layer(ConvParam(o));
  layer.SetUp({&x}, {&y});
  x.Reshape({1, 3, 5, 5});
  EXPECT_THROW(layer.Reshape({&x}, {&y}), Error);
}

// ---- On each backend: CAFFE and ONEDNN on the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(Convolution, layer_engines::WithOneDnn, layer_engines::WithOneDnnBesideCaffe);

TYPED_TEST(ConvolutionBesideCaffe, MatchesCaffeOnCpu) {
  const std::vector<gpu_compare::LayerCase> cases = {
      {R"(name: "conv3x3" type: "Convolution" convolution_param { num_output: 6 kernel_size: 3 pad: 1
          )" + layer_engines::kFillers + R"( })", {{3, 4, 9, 8}}},
      {R"(name: "conv_s2_g2_d2" type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 stride: 2
          pad: 2 group: 2 dilation: 2 )" + layer_engines::kFillers + R"( })", {{2, 4, 11, 10}}},
      {R"(name: "conv_nobias_2bottoms" type: "Convolution" convolution_param { num_output: 5 kernel_h: 5
          kernel_w: 3 bias_term: false weight_filler { type: "gaussian" std: 0.3 } })",
       {{2, 3, 8, 7}, {2, 3, 8, 7}}, 2},
      // Channels in blocks of 16, where oneDNN's blocked kernels run, and a 1x1 projection.
      {R"(name: "conv16" type: "Convolution" convolution_param { num_output: 16 kernel_size: 3 pad: 1
          )" + layer_engines::kFillers + R"( })", {{2, 16, 6, 6}}},
      {R"(name: "conv1x1" type: "Convolution" convolution_param { num_output: 16 kernel_size: 1 stride: 2
          bias_term: false weight_filler { type: "gaussian" std: 0.3 } })", {{2, 32, 7, 7}}},
  };
  for (const auto& c : cases) layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>(c);
}

// Random windows and the models' own shapes (conv_cases.hpp), at 1 and 2 compute threads.
TYPED_TEST(ConvolutionBesideCaffe, MatchesCaffeOnCpuOnRandomShapes) {
  conv_cases::ExpectWindowsMatchCaffeOnCpu<TypeParam>(conv_cases::RandomConvCases, 24, 20);
}

TYPED_TEST(ConvolutionOn, GradientCheck) {
  layer_engines::CheckGradient<TypeParam>({R"(name: "conv" type: "Convolution" convolution_param { num_output: 3
      kernel_size: 3 stride: 2 pad: 1 )" + layer_engines::kFillers + R"( })"});
  layer_engines::CheckGradient<TypeParam>({R"(name: "conv_g2_d2" type: "Convolution" convolution_param {
      num_output: 4 kernel_h: 3 kernel_w: 2 group: 2 dilation: 2 )" + layer_engines::kFillers + R"( })",
                                           {{2, 4, 6, 5}}});
}

// A convolution absorbs the ReLU after it where it runs on oneDNN (its forward as a post-op; the ReLU keeps its
// backward): the net computes what the separate layers compute.
TYPED_TEST(ConvolutionOn, AbsorbingItsReluChangesNothing) {
  const std::vector<std::string> absorbed = layer_engines::ExpectFusionChangesNothing<TypeParam>(R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 16 dim: 6 dim: 6 } } }
      layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 16
              kernel_size: 3 pad: 1 )" + layer_engines::kFillers + R"( } }
      layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
      layer { name: "loss" type: "Reduction" bottom: "c" top: "loss" reduction_param { operation: SUMSQ }
              loss_weight: 1 })", 1e-6);
  EXPECT_EQ(absorbed, (std::is_same_v<TypeParam, layer_engines::OneDnnCpu> ? std::vector<std::string>{"relu"}
                                                                          : std::vector<std::string>{}));
}

}  // namespace
}  // namespace strata
