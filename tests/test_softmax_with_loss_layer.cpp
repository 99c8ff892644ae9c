#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gradient_checker.hpp"
#include "strata/layers/softmax_with_loss_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter LossParam() {
  LayerParameter p;
  p.set_name("loss");
  p.set_type("SoftmaxWithLoss");
  return p;
}

// Scores (2, 4) whose softmax rows are (0.1, 0.2, 0.3, 0.4) and (1/8, 1/8, 1/4, 1/2); labels 2 and 3.
template <typename Dtype>
void FillTwoRows(Blob<Dtype>* x, Blob<Dtype>* labels) {
  const double a[2][4] = {{1, 2, 3, 4}, {1, 1, 2, 4}};
  const double shift[2] = {100, -50};
  x->Reshape({2, 4});
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) x->mutable_cpu_data()[r * 4 + c] = static_cast<Dtype>(std::log(a[r][c]) + shift[r]);
  labels->Reshape({2});
  labels->mutable_cpu_data()[0] = 2;
  labels->mutable_cpu_data()[1] = 3;
}

TEST(SoftmaxWithLossLayer, HandWorkedForwardBackward) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Blob<T> x, labels, loss, prob;
    FillTwoRows(&x, &labels);
    SoftmaxWithLossLayer<T> layer(LossParam());
    layer.SetUp({&x, &labels}, {&loss, &prob});
    const T weighted = layer.Forward({&x, &labels}, {&loss, &prob});
    EXPECT_EQ(loss.num_axes(), 0);
    ASSERT_EQ(prob.shape(), x.shape());
    const double expect_loss = -(std::log(0.3) + std::log(0.5)) / 2;  // VALID: 2 labelled positions
    EXPECT_NEAR(loss.cpu_data()[0], expect_loss, 1e-6);
    EXPECT_NEAR(weighted, expect_loss, 1e-6);  // loss weight 1 by default
    const double p[] = {0.1, 0.2, 0.3, 0.4, 0.125, 0.125, 0.25, 0.5};
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(prob.cpu_data()[i], p[i], 1e-6) << i;
    loss.mutable_cpu_diff()[0] = 3;  // a loss weight of 3
    layer.Backward({&loss, &prob}, {true, false}, {&x, &labels});
    // 3 * (p - onehot(label)) / 2
    const double dx[] = {0.15, 0.3, -1.05, 0.6, 0.1875, 0.1875, 0.375, -0.75};
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(x.cpu_diff()[i], dx[i], 1e-6) << i;
  };
  run(0.0);
  run(0.0f);
}

// Scores (2, 3, 2): four positions (n, i), softmax over the 3 classes of each:
//   (0,0) a = (1,1,2) label 2 -> p 1/2    (0,1) a = (1,2,1) label 9 = ignore_label
//   (1,0) a = (2,1,1) label 0 -> p 1/2    (1,1) a = (1,3,4) label 1 -> p 3/8
void FillStrided(Blob<double>* x, Blob<double>* labels) {
  const double a[2][3][2] = {{{1, 1}, {1, 2}, {2, 1}}, {{2, 1}, {1, 3}, {1, 4}}};
  x->Reshape({2, 3, 2});
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 2; ++i) x->mutable_cpu_data()[n * 6 + c * 2 + i] = std::log(a[n][c][i]);
  labels->Reshape({2, 2});
  const double l[] = {2, 9, 0, 1};
  std::copy(l, l + 4, labels->mutable_cpu_data());
}

LayerParameter StridedParam(LossParameter::NormalizationMode mode) {
  LayerParameter p = LossParam();
  p.mutable_loss_param()->set_ignore_label(9);
  p.mutable_loss_param()->set_normalization(mode);
  return p;
}

// A label that is no class names the layer and the batch item.
TEST(SoftmaxWithLossLayer, BadLabelNamesLayerAndBatchItem) {
  Blob<float> x, labels, loss;
  FillTwoRows(&x, &labels);
  labels.mutable_cpu_data()[1] = 4;
  SoftmaxWithLossLayer<float> layer(LossParam());
  layer.SetUp({&x, &labels}, {&loss});
  try {
    layer.Forward({&x, &labels}, {&loss});
    ADD_FAILURE() << "label 4 of 4 classes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'loss' (SoftmaxWithLoss): batch item 1 has label 4, not a class "
                                         "index in [0, 4)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SoftmaxWithLossLayer, NormalizationModes) {
  const double sum = -(2 * std::log(0.5) + std::log(0.375));
  const struct {
    LossParameter::NormalizationMode mode;
    double normaliser;
  } cases[] = {
      {LossParameter::VALID, 3}, {LossParameter::FULL, 4}, {LossParameter::BATCH_SIZE, 2}, {LossParameter::NONE, 1}};
  for (const auto& c : cases) {
    Blob<double> x, labels, loss;
    FillStrided(&x, &labels);
    SoftmaxWithLossLayer<double> layer(StridedParam(c.mode));
    layer.SetUp({&x, &labels}, {&loss});
    layer.Forward({&x, &labels}, {&loss});
    EXPECT_NEAR(loss.cpu_data()[0], sum / c.normaliser, 1e-12) << "mode " << c.mode;
    loss.mutable_cpu_diff()[0] = 1;
    layer.Backward({&loss}, {true, false}, {&x, &labels});
    // Position (0,0): p = (1/4, 1/4, 1/2), label 2 -> (1/4, 1/4, -1/2) / normaliser; (0,1) ignored -> 0.
    EXPECT_NEAR(x.cpu_diff()[0 * 2 + 0], 0.25 / c.normaliser, 1e-12);
    EXPECT_NEAR(x.cpu_diff()[1 * 2 + 0], 0.25 / c.normaliser, 1e-12);
    EXPECT_NEAR(x.cpu_diff()[2 * 2 + 0], -0.5 / c.normaliser, 1e-12);
    for (int ch = 0; ch < 3; ++ch) EXPECT_EQ(x.cpu_diff()[ch * 2 + 1], 0.0);
    // Position (1,1): p = (1/8, 3/8, 1/2), label 1.
    EXPECT_NEAR(x.cpu_diff()[6 + 1 * 2 + 1], -0.625 / c.normaliser, 1e-12);
  }
}

// The deprecated `normalize` decides only when `normalization` is not given: false -> BATCH_SIZE, true -> VALID.
TEST(SoftmaxWithLossLayer, DeprecatedNormalize) {
  const double sum = -(2 * std::log(0.5) + std::log(0.375));
  auto loss_with = [&](bool normalize, bool set_mode) {
    LayerParameter p = LossParam();
    p.mutable_loss_param()->set_ignore_label(9);
    p.mutable_loss_param()->set_normalize(normalize);
    if (set_mode) p.mutable_loss_param()->set_normalization(LossParameter::FULL);
    Blob<double> x, labels, loss;
    FillStrided(&x, &labels);
    SoftmaxWithLossLayer<double> layer(p);
    layer.SetUp({&x, &labels}, {&loss});
    layer.Forward({&x, &labels}, {&loss});
    return loss.cpu_data()[0];
  };
  EXPECT_NEAR(loss_with(false, false), sum / 2, 1e-12);
  EXPECT_NEAR(loss_with(true, false), sum / 3, 1e-12);
  EXPECT_NEAR(loss_with(false, true), sum / 4, 1e-12);
}

TEST(SoftmaxWithLossLayer, GradientEveryNormalization) {
  for (auto mode : {LossParameter::VALID, LossParameter::FULL, LossParameter::BATCH_SIZE, LossParameter::NONE}) {
    Blob<double> x({3, 4, 2}), labels({3, 2}), loss;
    FillUniform(&x, -2.0, 2.0);
    const double l[] = {0, 3, 9, 1, 2, 9};  // two ignored
    std::copy(l, l + 6, labels.mutable_cpu_data());
    SoftmaxWithLossLayer<double> layer(StridedParam(mode));
    GradientChecker<double> checker(1e-4, 1e-7);
    checker.CheckGradient(&layer, {&x, &labels}, {&loss}, /*check_bottom=*/0);
  }
}

TEST(SoftmaxWithLossLayer, GradientLastAxis) {
  LayerParameter p = LossParam();
  p.mutable_softmax_param()->set_axis(-1);
  Blob<double> x({2, 3, 4}), labels({2, 3}), loss;
  FillUniform(&x, -2.0, 2.0);
  const double l[] = {0, 3, 2, 1, 1, 0};
  std::copy(l, l + 6, labels.mutable_cpu_data());
  SoftmaxWithLossLayer<double> layer(p);
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(&layer, {&x, &labels}, {&loss}, 0);
}

TEST(SoftmaxWithLossLayer, AllIgnoredGivesZero) {
  Blob<double> x({2, 3}), labels({2}), loss;
  FillUniform(&x, -1.0, 1.0);
  cpu_set(2, 9.0, labels.mutable_cpu_data());
  SoftmaxWithLossLayer<double> layer(StridedParam(LossParameter::VALID));
  layer.SetUp({&x, &labels}, {&loss});
  layer.Forward({&x, &labels}, {&loss});
  EXPECT_EQ(loss.cpu_data()[0], 0.0);
  layer.Backward({&loss}, {true, false}, {&x, &labels});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(x.cpu_diff()[i], 0.0);
}

TEST(SoftmaxWithLossLayer, BadLabelIsAnError) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {4.0, -1.0, 1e10, nan}) {
    Blob<double> x, labels, loss;
    FillTwoRows(&x, &labels);
    labels.mutable_cpu_data()[1] = bad;
    SoftmaxWithLossLayer<double> layer(LossParam());
    layer.SetUp({&x, &labels}, {&loss});
    try {
      layer.Forward({&x, &labels}, {&loss});
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const Error& e) {
      std::ostringstream value;
      value << "label " << bad;
      EXPECT_NE(std::string(e.what()).find(value.str()), std::string::npos) << e.what();
    }
  }
}

TEST(SoftmaxWithLossLayer, LabelCountMismatchIsAnError) {
  Blob<float> x({2, 3, 2}), labels({2, 3}), loss;
  SoftmaxWithLossLayer<float> layer(LossParam());
  EXPECT_THROW(layer.SetUp({&x, &labels}, {&loss}), Error);
  Blob<float> x2({2, 3}), labels2({3});
  SoftmaxWithLossLayer<float> layer2(LossParam());
  EXPECT_THROW(layer2.SetUp({&x2, &labels2}, {&loss}), Error);
}

TEST(SoftmaxWithLossLayer, NoGradientIntoLabels) {
  Blob<float> x, labels, loss;
  FillTwoRows(&x, &labels);
  SoftmaxWithLossLayer<float> layer(LossParam());
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.SetUp({&x, &labels}, {&loss});
  layer.Forward({&x, &labels}, {&loss});
  EXPECT_THROW(layer.Backward({&loss}, {true, true}, {&x, &labels}), Error);
}

TEST(SoftmaxWithLossLayer, DefaultLossWeights) {
  Blob<float> x, labels, loss, prob;
  FillTwoRows(&x, &labels);
  SoftmaxWithLossLayer<float> one_top(LossParam());
  one_top.SetUp({&x, &labels}, {&loss});
  EXPECT_EQ(one_top.loss(0), 1.0f);
  SoftmaxWithLossLayer<float> two_tops(LossParam());
  two_tops.SetUp({&x, &labels}, {&loss, &prob});
  EXPECT_EQ(two_tops.loss(0), 1.0f);
  EXPECT_EQ(two_tops.loss(1), 0.0f);
  LayerParameter weighted = LossParam();
  weighted.add_loss_weight(2);
  SoftmaxWithLossLayer<float> explicit_weight(weighted);
  explicit_weight.SetUp({&x, &labels}, {&loss});
  const float l = explicit_weight.Forward({&x, &labels}, {&loss});
  EXPECT_NEAR(l, 2 * loss.cpu_data()[0], 1e-6);
}

// In a Net the loss layer counts as a loss with weight 1 without saying so, and the labels get no gradient
// even under force_backward.
TEST(SoftmaxWithLossLayer, InNet) {
  NetParameter param;
  ReadProtoFromTextString(R"(
    force_backward: true
    layer { name: "in" type: "Input" top: "x" top: "label"
            input_param { shape { dim: 2 dim: 4 } shape { dim: 2 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" }
  )",
                          &param, "test.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Net<double> net(param);
  const int loss_id =
      static_cast<int>(std::find(net.blob_names().begin(), net.blob_names().end(), "loss") - net.blob_names().begin());
  EXPECT_EQ(net.blob_loss_weights()[loss_id], 1.0);
  const int layer = static_cast<int>(net.layers().size()) - 1;
  EXPECT_TRUE(net.bottom_need_backward()[layer][0]);
  EXPECT_FALSE(net.bottom_need_backward()[layer][1]);
  double loss = 0;
  net.Forward(&loss);  // all-zero scores and labels: p = 1/4 everywhere
  EXPECT_NEAR(loss, std::log(4.0), 1e-12);
  net.Backward();
}

}  // namespace
}  // namespace strata
