#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/pooling_layer.hpp"
#include "strata/layers/spp_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Spp(const std::string& spp_param) {
  LayerParameter p;
  ReadProtoFromTextString("name: \"spp\" type: \"SPP\" spp_param { " + spp_param + " }", &p);
  return p;
}

// Channel 0 holds 0..15, channel 1 holds 15..0, both 4 x 4.
void FillRamps(Blob<double>* x) {
  for (int i = 0; i < 16; ++i) {
    x->mutable_cpu_data()[i] = i;
    x->mutable_cpu_data()[16 + i] = 15 - i;
  }
}

TEST(SPPLayer, HandWorkedMax) {
  // Level 0: one 4 x 4 window per channel; level 1: 2 x 2 windows of 2 x 2. Each level's channels in order.
  Blob<double> x({1, 2, 4, 4}), y;
  FillRamps(&x);
  SPPLayer<double> layer(Spp("pyramid_height: 2 pool: MAX"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 2 * (1 + 4)}));
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {15, 15, 5, 7, 13, 15, 15, 13, 7, 5});

  // Each output's gradient goes to its maximum; both levels' gradients add up (pixel 15 of channel 0 and
  // pixel 0 of channel 1 are the maxima of two windows).
  for (int i = 0; i < 10; ++i) y.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 5, 0, 1 + 6,
                              2 + 7, 0, 8, 0, 0, 0, 0, 0, 9, 0, 10, 0, 0, 0, 0, 0});
}

TEST(SPPLayer, HandWorkedAve) {
  Blob<double> x({1, 2, 4, 4}), y;
  FillRamps(&x);
  SPPLayer<double> layer(Spp("pyramid_height: 2 pool: AVE"));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {7.5, 7.5, 2.5, 4.5, 10.5, 12.5, 12.5, 10.5, 4.5, 2.5});
  // dy = 16 on level 0 and 4 on level 1: every pixel gets 16/16 + 4/4 = 2.
  for (int i = 0; i < 10; ++i) y.mutable_cpu_diff()[i] = i < 2 ? 16 : 4;
  layer.Backward({&y}, {true}, {&x});
  for (int i = 0; i < 32; ++i) EXPECT_DOUBLE_EQ(x.cpu_diff()[i], 2) << i;
}

TEST(SPPLayer, LevelParametersAsCaffe) {
  // kernel ceil(size / bins), stride = kernel, pad (kernel * bins - size + 1) / 2.
  const PoolingParameter l2 = SPPLayer<float>::LevelParam(2, 9, 8, SPPParameter::AVE);
  EXPECT_EQ(l2.kernel_h(), 3u);
  EXPECT_EQ(l2.pad_h(), 2u);
  EXPECT_EQ(l2.stride_h(), 3u);
  EXPECT_EQ(l2.kernel_w(), 2u);
  EXPECT_EQ(l2.pad_w(), 0u);
  EXPECT_EQ(l2.stride_w(), 2u);
  EXPECT_EQ(l2.pool(), PoolingParameter::AVE);
  const PoolingParameter l1 = SPPLayer<float>::LevelParam(1, 5, 7, SPPParameter::MAX);
  EXPECT_EQ(l1.kernel_h(), 3u);
  EXPECT_EQ(l1.pad_h(), 1u);
  EXPECT_EQ(l1.kernel_w(), 4u);
  EXPECT_EQ(l1.pad_w(), 1u);
  EXPECT_EQ(l1.pool(), PoolingParameter::MAX);
  const PoolingParameter l0 = SPPLayer<float>::LevelParam(0, 5, 7, SPPParameter::MAX);
  EXPECT_EQ(l0.kernel_h(), 5u);
  EXPECT_EQ(l0.kernel_w(), 7u);
  EXPECT_EQ(l0.pad_h(), 0u);
}

// The top against Pooling layers with the levels' windows written out (9 x 8 input, 3 levels).
void CheckAgainstPooling(const std::string& pool) {
  SCOPED_TRACE(pool);
  Blob<double> x({2, 3, 9, 8}), y;
  FillUniform(&x, -1.0, 1.0);
  SPPLayer<double> layer(Spp("pyramid_height: 3 pool: " + pool));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 3 * (1 + 4 + 16)}));
  layer.Forward({&x}, {&y});
  const char* windows[] = {"kernel_h: 9 kernel_w: 8 stride_h: 9 stride_w: 8 pad_h: 0 pad_w: 0",
                           "kernel_h: 5 kernel_w: 4 stride_h: 5 stride_w: 4 pad_h: 1 pad_w: 0",
                           "kernel_h: 3 kernel_w: 2 stride_h: 3 stride_w: 2 pad_h: 2 pad_w: 0"};
  int offset = 0;
  for (int l = 0; l < 3; ++l) {
    LayerParameter p;
    ReadProtoFromTextString("type: \"Pooling\" pooling_param { pool: " + pool + " " + windows[l] + " }", &p);
    PoolingLayer<double> pooling(p);
    Blob<double> pooled;
    pooling.SetUp({&x}, {&pooled});
    pooling.Forward({&x}, {&pooled});
    ASSERT_EQ(pooled.shape(), (std::vector<int>{2, 3, 1 << l, 1 << l}));
    const int width = pooled.count(1);
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < width; ++i) {
        ASSERT_EQ(y.cpu_data()[n * y.count(1) + offset + i], pooled.cpu_data()[n * width + i]) << l << " " << i;
      }
    }
    offset += width;
  }
}

TEST(SPPLayer, MatchesPoolingLevels) {
  CheckAgainstPooling("MAX");
  CheckAgainstPooling("AVE");
}

TEST(SPPLayer, PyramidHeightOneKeepsPoolingShape) {
  // As in Caffe: the single level's N x C x 1 x 1, global pooling.
  Blob<double> x({2, 3, 5, 4}), y;
  FillUniform(&x, -1.0, 1.0);
  SPPLayer<double> layer(Spp("pyramid_height: 1"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 3, 1, 1}));
  layer.Forward({&x}, {&y});
  for (int p = 0; p < 6; ++p) {
    double m = x.cpu_data()[p * 20];
    for (int i = 1; i < 20; ++i) m = std::max(m, x.cpu_data()[p * 20 + i]);
    EXPECT_EQ(y.cpu_data()[p], m);
  }
}

TEST(SPPLayer, Gradient) {
  for (const char* param : {"pyramid_height: 3 pool: MAX", "pyramid_height: 3 pool: AVE", "pyramid_height: 1 pool: AVE"}) {
    SCOPED_TRACE(param);
    Blob<double> x({2, 2, 9, 8}), y;
    FillUniform(&x, -1.0, 1.0);
    SPPLayer<double> layer(Spp(param));
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(SPPLayer, ReshapeRebuildsTheLevels) {
  Blob<double> small({1, 2, 4, 4}), large({3, 2, 9, 8}), y, fresh_y;
  FillUniform(&large, -1.0, 1.0);
  SPPLayer<double> layer(Spp("pyramid_height: 3 pool: AVE"));
  layer.SetUp({&small}, {&y});
  layer.Forward({&large}, {&y});  // Forward reshapes
  SPPLayer<double> fresh(Spp("pyramid_height: 3 pool: AVE"));
  fresh.SetUp({&large}, {&fresh_y});
  fresh.Forward({&large}, {&fresh_y});
  ASSERT_EQ(y.shape(), fresh_y.shape());
  for (int i = 0; i < y.count(); ++i) ASSERT_EQ(y.cpu_data()[i], fresh_y.cpu_data()[i]) << i;
  Blob<double> tiny({1, 2, 3, 3});  // too small for 4 x 4 bins
  EXPECT_THROW(layer.Reshape({&tiny}, {&y}), Error);
}

TEST(SPPLayer, BadConfigurationsAreRefused) {
  auto setup = [](const std::string& spp_param, const std::vector<int>& shape) {
    Blob<float> x(shape), y;
    auto layer = LayerRegistry<float>::CreateLayer(Spp(spp_param));
    layer->SetUp({&x}, {&y});
  };
  EXPECT_NO_THROW(setup("pyramid_height: 3", {1, 2, 4, 4}));
  EXPECT_THROW(setup("pool: MAX", {1, 2, 4, 4}), Error);                              // no pyramid_height
  EXPECT_THROW(setup("pyramid_height: 2", {1, 2, 4}), Error);                         // 3 axes
  EXPECT_THROW(setup("pyramid_height: 3", {1, 2, 3, 3}), Error);                      // 4 x 4 bins on 3 x 3
  EXPECT_THROW(setup("pyramid_height: 2", {1, 2, 0, 4}), Error);                      // empty
  try {
    setup("pyramid_height: 3", {1, 2, 5, 7});
    ADD_FAILURE() << "5 x 7 accepted for 4 x 4 bins";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
