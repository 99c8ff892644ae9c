// Caffe's loss layers beside SoftmaxWithLoss: EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, HingeLoss,
// InfogainLoss and MultinomialLogisticLoss. Each has a hand-worked forward and backward, finite-difference checks
// of every bottom that takes a gradient, its ignore_label and normalisation modes where it has them, and its bad
// inputs refused with a message that names what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/net.hpp"
#include "strata/parallel.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Param(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString(text, &p, "test layer");
  return p;
}

template <typename T>
std::shared_ptr<Layer<T>> Make(const std::string& text) {
  return LayerRegistry<T>::CreateLayer(Param(text));
}

template <typename T>
void Fill(Blob<T>* b, const std::vector<int>& shape, const std::vector<double>& values) {
  b->Reshape(shape);
  ASSERT_EQ(static_cast<size_t>(b->count()), values.size());
  std::copy(values.begin(), values.end(), b->mutable_cpu_data());
}

template <typename T>
void ExpectNear(const T* got, const std::vector<double>& want, double tol, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
}

// SetUp, Forward, then Backward with the loss weight `w` in the top's diff. Returns Forward's weighted loss.
template <typename T>
T ForwardBackward(Layer<T>* layer, const std::vector<Blob<T>*>& bottom, const std::vector<Blob<T>*>& top, T w,
                  const std::vector<bool>& down) {
  layer->SetUp(bottom, top);
  const T weighted = layer->Forward(bottom, top);
  top[0]->mutable_cpu_diff()[0] = w;
  layer->Backward(top, down, bottom);
  return weighted;
}

// Runs f and expects an Error whose message holds every one of `parts`.
void ExpectError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

const char* const kModeNames[] = {"FULL", "VALID", "BATCH_SIZE", "NONE"};

// ---------------------------------------------------------------------------------------------------------------
// What all six share.

TEST(LossLayersCatalogue, RegisteredWithScalarTopAndDefaultWeight) {
  const char* types[] = {"EuclideanLoss", "SigmoidCrossEntropyLoss", "HingeLoss", "MultinomialLogisticLoss"};
  for (const char* type : types) {
    SCOPED_TRACE(type);
    auto layer = Make<float>(std::string("name: 'l' type: '") + type + "'");
    EXPECT_STREQ(layer->type(), type);
    Blob<float> x({2, 3}), y({2}), loss;
    if (std::string(type) == "EuclideanLoss" || std::string(type) == "SigmoidCrossEntropyLoss") y.Reshape({2, 3});
    FillUniform(&x, 0.1f, 0.9f);
    layer->SetUp({&x, &y}, {&loss});
    EXPECT_EQ(loss.num_axes(), 0);
    EXPECT_EQ(layer->loss(0), 1.0f);
    EXPECT_TRUE(layer->AllowForceBackward(0));
    EXPECT_EQ(layer->AutoTopBlobs(), true);
  }
}

TEST(LossLayersCatalogue, ExplicitLossWeightScalesTheLossAndGradient) {
  Blob<double> a, b, loss;
  Fill(&a, {2, 2}, {1, 2, 3, 4});
  Fill(&b, {2, 2}, {0, 2, 1, 1});
  auto layer = Make<double>("name: 'l' type: 'EuclideanLoss' loss_weight: 2.5");
  layer->SetUp({&a, &b}, {&loss});
  EXPECT_EQ(layer->loss(0), 2.5);
  EXPECT_NEAR(layer->Forward({&a, &b}, {&loss}), 2.5 * 3.5, 1e-12);
  EXPECT_NEAR(loss.cpu_data()[0], 3.5, 1e-12);
  EXPECT_EQ(loss.cpu_diff()[0], 2.5);  // the loss weight, set by SetUp
  layer->Backward({&loss}, {true, false}, {&a, &b});
  ExpectNear(a.cpu_diff(), {1.25, 0, 2.5, 3.75}, 1e-12, "da");
}

// The first dimensions must agree (Caffe's LossLayer::Reshape).
TEST(LossLayersCatalogue, FirstDimensionsMustAgree) {
  const char* types[] = {"EuclideanLoss", "SigmoidCrossEntropyLoss", "HingeLoss", "MultinomialLogisticLoss"};
  for (const char* type : types) {
    SCOPED_TRACE(type);
    auto layer = Make<float>(std::string("name: 'l' type: '") + type + "'");
    Blob<float> x({2, 3}), y({3, 2}), loss;
    ExpectError([&] { layer->SetUp({&x, &y}, {&loss}); },
                {"layer 'l'", "same first dimension", "2 3 (6) and 3 2 (6)"});
  }
}

// ---------------------------------------------------------------------------------------------------------------
// EuclideanLoss

TEST(EuclideanLossLayer, HandWorked) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> a, b, loss;
    Fill(&a, {2, 2}, {1, 2, 3, 4});
    Fill(&b, {2, 2}, {0, 2, 1, 1});
    auto layer = Make<T>("name: 'l' type: 'EuclideanLoss'");
    // a - b = (1, 0, 2, 3): sum of squares 14, over 2N = 4.
    ForwardBackward<T>(layer.get(), {&a, &b}, {&loss}, T(3), {true, true});
    EXPECT_NEAR(loss.cpu_data()[0], 3.5, 1e-6);
    // da = w (a - b) / N with w = 3, N = 2; db = -da.
    ExpectNear(a.cpu_diff(), {1.5, 0, 3, 4.5}, 1e-6, "da");
    ExpectNear(b.cpu_diff(), {-1.5, 0, -3, -4.5}, 1e-6, "db");
  };
  run(0.0);
  run(0.0f);
}

TEST(EuclideanLossLayer, GradientBothBottoms) {
  // Same count per item, different axes (Caffe compares count(1) only).
  Blob<double> a({3, 4}), b({3, 2, 2}), loss;
  FillUniform(&a, -1.0, 1.0, 1);
  FillUniform(&b, -1.0, 1.0, 2);
  auto layer = Make<double>("name: 'l' type: 'EuclideanLoss'");
  EXPECT_TRUE(layer->AllowForceBackward(1));  // both bottoms take a gradient
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(layer.get(), {&a, &b}, {&loss});
  EXPECT_EQ(checker.last_num_checked(), 24);
}

TEST(EuclideanLossLayer, SizesMustAgree) {
  Blob<float> a({2, 3}), b({2, 4}), loss;
  auto layer = Make<float>("name: 'l' type: 'EuclideanLoss'");
  ExpectError([&] { layer->SetUp({&a, &b}, {&loss}); }, {"layer 'l' (EuclideanLoss)", "same number of values per item"});
}

// ---------------------------------------------------------------------------------------------------------------
// SigmoidCrossEntropyLoss

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(SigmoidCrossEntropyLossLayer, HandWorked) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> x, t, loss;
    const double l3 = std::log(3.0);
    Fill(&x, {2, 2}, {0, l3, -l3, 2});
    Fill(&t, {2, 2}, {1, 1, 0, 0.5});
    auto layer = Make<T>("name: 'l' type: 'SigmoidCrossEntropyLoss'");
    ForwardBackward<T>(layer.get(), {&x, &t}, {&loss}, T(1), {true, false});
    // sigmoid(x) = (1/2, 3/4, 1/4, s2): -log 1/2, -log 3/4, -log(1 - 1/4), and for t = 1/2 at x = 2,
    // -(log s2 + log(1 - s2)) / 2 = 1 + log(1 + e^-2). Default normalisation BATCH_SIZE: over N = 2.
    const double sum = std::log(2.0) + 2 * std::log(4.0 / 3) + 1 + std::log1p(std::exp(-2.0));
    EXPECT_NEAR(loss.cpu_data()[0], sum / 2, 1e-6);
    ExpectNear(x.cpu_diff(), {-0.25, -0.125, 0.125, (Sigmoid(2) - 0.5) / 2}, 1e-6, "dx");
  };
  run(0.0);
  run(0.0f);
}

// |x| of 100 neither overflows nor loses the loss to cancellation.
TEST(SigmoidCrossEntropyLossLayer, StableForLargeScores) {
  Blob<float> x, t, loss;
  Fill(&x, {1, 4}, {100, -100, 100, -100});
  Fill(&t, {1, 4}, {1, 0, 0, 1});
  auto layer = Make<float>("name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { normalization: NONE }");
  ForwardBackward<float>(layer.get(), {&x, &t}, {&loss}, 1.f, {true, false});
  EXPECT_NEAR(loss.cpu_data()[0], 200.0, 1e-3);  // the two right answers cost ~0, the two wrong ones 100 each
  ExpectNear(x.cpu_diff(), {0, 0, 1, -1}, 1e-6, "dx");
}

// Scores (2, 3) whose targets at two positions are ignore_label -1; the normaliser of each mode.
TEST(SigmoidCrossEntropyLossLayer, IgnoreLabelAndEveryNormalization) {
  const std::vector<double> xs = {0.5, -1, 2, 0, 1.5, -0.5};
  const std::vector<double> ts = {1, -1, 0, 0.25, -1, 1};
  double sum = 0;
  for (int i = 0; i < 6; ++i) {
    if (ts[i] == -1) continue;
    const double s = Sigmoid(xs[i]);
    sum -= ts[i] * std::log(s) + (1 - ts[i]) * std::log(1 - s);
  }
  const struct {
    std::string loss_param;
    double normaliser;
  } cases[] = {{"normalization: VALID", 4},
               {"normalization: FULL", 6},
               {"normalization: BATCH_SIZE", 2},
               {"normalization: NONE", 1},
               {"", 2},                              // Caffe's default for this layer: BATCH_SIZE
               {"normalize: true", 4},               // deprecated: VALID
               {"normalize: false", 2},              // deprecated: BATCH_SIZE
               {"normalize: true normalization: FULL", 6}};  // normalization wins
  for (const auto& c : cases) {
    SCOPED_TRACE(c.loss_param);
    Blob<double> x, t, loss;
    Fill(&x, {2, 3}, xs);
    Fill(&t, {2, 3}, ts);
    auto layer = Make<double>("name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 " +
                              c.loss_param + " }");
    ForwardBackward<double>(layer.get(), {&x, &t}, {&loss}, 1.0, {true, false});
    EXPECT_NEAR(loss.cpu_data()[0], sum / c.normaliser, 1e-12);
    for (int i = 0; i < 6; ++i) {
      const double want = ts[i] == -1 ? 0 : (Sigmoid(xs[i]) - ts[i]) / c.normaliser;
      EXPECT_NEAR(x.cpu_diff()[i], want, 1e-12) << i;
    }
  }
}

TEST(SigmoidCrossEntropyLossLayer, GradientEveryNormalization) {
  for (const char* mode : kModeNames) {
    SCOPED_TRACE(mode);
    Blob<double> x({3, 2, 2}), t({3, 4}), loss;
    FillUniform(&x, -3.0, 3.0);
    FillUniform(&t, 0.0, 1.0, 2);
    t.mutable_cpu_data()[1] = 7;  // ignored
    t.mutable_cpu_data()[6] = 7;
    auto layer = Make<double>(std::string("name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 7 "
                                          "normalization: ") +
                              mode + " }");
    GradientChecker<double> checker(1e-4, 1e-7);
    checker.CheckGradient(layer.get(), {&x, &t}, {&loss}, 0);
  }
}

TEST(SigmoidCrossEntropyLossLayer, BadInputs) {
  auto layer = Make<float>("name: 'l' type: 'SigmoidCrossEntropyLoss'");
  Blob<float> x({2, 3}), t({2, 4}), loss;
  ExpectError([&] { layer->SetUp({&x, &t}, {&loss}); }, {"layer 'l'", "same count", "2 3 (6) and 2 4 (8)"});
  t.Reshape({2, 3});
  FillUniform(&t, 0.f, 1.f);
  layer->SetUp({&x, &t}, {&loss});
  layer->Forward({&x, &t}, {&loss});
  EXPECT_FALSE(layer->AllowForceBackward(1));
  ExpectError([&] { layer->Backward({&loss}, {true, true}, {&x, &t}); }, {"cannot backpropagate to its targets"});
}

// ---------------------------------------------------------------------------------------------------------------
// ContrastiveLoss

// Three pairs of 2-d features: similar at distance 0.5, dissimilar at 0.6 (inside the margin of 1), dissimilar at 5.
template <typename T>
void FillPairs(Blob<T>* a, Blob<T>* b, Blob<T>* y) {
  Fill(a, {3, 2}, {0, 0, 1, 0, 0, 0});
  Fill(b, {3, 2}, {0.3, 0.4, 1, 0.6, 3, 4});
  Fill(y, {3}, {1, 0, 0});
}

TEST(ContrastiveLossLayer, HandWorked) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> a, b, y, loss;
    FillPairs(&a, &b, &y);
    auto layer = Make<T>("name: 'l' type: 'ContrastiveLoss'");
    ForwardBackward<T>(layer.get(), {&a, &b, &y}, {&loss}, T(1), {true, true, false});
    // d^2 = 0.25 for the similar pair, max(1 - 0.6, 0)^2 = 0.16 and 0 for the others; over 2N = 6.
    EXPECT_NEAR(loss.cpu_data()[0], 0.41 / 6, 1e-6);
    // da = (a - b) / N for the similar pair; -(margin - d) / (d + 1e-4) (a - b) / N inside the margin; 0 outside.
    const double inside = -(1 - 0.6) / (0.6 + 1e-4) * -0.6 / 3;
    ExpectNear(a.cpu_diff(), {-0.1, -0.4 / 3, 0, inside, 0, 0}, 1e-6, "da");
    ExpectNear(b.cpu_diff(), {0.1, 0.4 / 3, 0, -inside, 0, 0}, 1e-6, "db");
  };
  run(0.0);
  run(0.0f);
}

TEST(ContrastiveLossLayer, LegacyVersionAndMargin) {
  Blob<double> a, b, y, loss;
  FillPairs(&a, &b, &y);
  // Legacy: a dissimilar pair costs max(margin - d^2, 0) = 1 - 0.36, with the gradient -(a - b) / N.
  auto legacy = Make<double>("name: 'l' type: 'ContrastiveLoss' contrastive_loss_param { legacy_version: true }");
  ForwardBackward<double>(legacy.get(), {&a, &b, &y}, {&loss}, 1.0, {true, true, false});
  EXPECT_NEAR(loss.cpu_data()[0], (0.25 + 0.64) / 6, 1e-12);
  ExpectNear(a.cpu_diff(), {-0.1, -0.4 / 3, 0, 0.2, 0, 0}, 1e-12, "da");
  // margin 6 takes in the pair at distance 5 too: (6 - 0.6)^2 and (6 - 5)^2.
  auto wide = Make<double>("name: 'l' type: 'ContrastiveLoss' contrastive_loss_param { margin: 6 }");
  ForwardBackward<double>(wide.get(), {&a, &b, &y}, {&loss}, 1.0, {true, true, false});
  EXPECT_NEAR(loss.cpu_data()[0], (0.25 + 5.4 * 5.4 + 1) / 6, 1e-12);
  EXPECT_NEAR(a.cpu_diff()[4], -(6 - 5) / (5 + 1e-4) * -3 / 3, 1e-12);
}

// A pair is similar when its label truncated to int is not 0, as in Caffe: 0.5 is dissimilar, 2 and -1 similar.
TEST(ContrastiveLossLayer, SimilarityIsTheTruncatedLabel) {
  Blob<double> a, b, y, loss;
  FillPairs(&a, &b, &y);
  Fill(&y, {3, 1, 1, 1}, {0.5, 2, -1});
  auto layer = Make<double>("name: 'l' type: 'ContrastiveLoss'");
  ForwardBackward<double>(layer.get(), {&a, &b, &y}, {&loss}, 1.0, {true, true, false});
  EXPECT_NEAR(loss.cpu_data()[0], (0.25 + 0.36 + 25) / 6, 1e-12);
}

TEST(ContrastiveLossLayer, GradientBothFeatureBottoms) {
  for (const char* param : {"contrastive_loss_param { margin: 2 }",
                            "contrastive_loss_param { margin: 2 legacy_version: true }"}) {
    SCOPED_TRACE(param);
    const bool legacy = std::string(param).find("legacy") != std::string::npos;
    for (int bottom = 0; bottom < 2; ++bottom) {
      Blob<double> a({6, 3, 1, 1}), b({6, 3, 1, 1}), y({6}), loss;
      FillUniform(&a, -1.0, 1.0, 1);
      FillUniform(&b, -1.0, 1.0, 2);
      const double similar[] = {1, 0, 0, 1, 0, 0};
      std::copy(similar, similar + 6, y.mutable_cpu_data());
      auto layer = Make<double>(std::string("name: 'l' type: 'ContrastiveLoss' ") + param);
      // Caffe's gradient inside the margin divides by d + 1e-4 rather than d: off by ~1e-4 relative there.
      GradientChecker<double> checker(1e-5, legacy ? 1e-7 : 1e-3);
      checker.CheckGradient(layer.get(), {&a, &b, &y}, {&loss}, bottom);
    }
  }
}

TEST(ContrastiveLossLayer, BadInputs) {
  auto layer = Make<float>("name: 'l' type: 'ContrastiveLoss'");
  EXPECT_TRUE(layer->AllowForceBackward(1));
  EXPECT_FALSE(layer->AllowForceBackward(2));
  Blob<float> a({3, 2}), b({3, 4}), y({3}), loss;
  ExpectError([&] { layer->SetUp({&a, &b, &y}, {&loss}); }, {"layer 'l'", "N x C features of the same C"});
  Blob<float> spatial({3, 2, 2, 1}), spatial_b({3, 2, 2, 1});
  ExpectError([&] { layer->SetUp({&spatial, &spatial_b, &y}, {&loss}); }, {"N x C features"});
  b.Reshape({3, 2});
  Blob<float> y2({3, 2});
  ExpectError([&] { layer->SetUp({&a, &b, &y2}, {&loss}); }, {"one similarity label per pair (3)", "3 2 (6)"});
  ExpectError([&] { layer->SetUp({&a, &b}, {&loss}); }, {"takes 3 bottom"});
  layer->SetUp({&a, &b, &y}, {&loss});
  layer->Forward({&a, &b, &y}, {&loss});
  ExpectError([&] { layer->Backward({&loss}, {true, true, true}, {&a, &b, &y}); },
              {"cannot backpropagate to its similarity labels (bottom 2)"});
}

// ---------------------------------------------------------------------------------------------------------------
// HingeLoss

// Two items of three scores; labels 0 and 1. Margins max(0, 1 + t x) (t = -1 at the label):
//   item 0: 0.5, 0, 1.2     item 1: 2.5, 0.7, 0.5
template <typename T>
void FillHinge(Blob<T>* x, Blob<T>* labels) {
  Fill(x, {2, 3}, {0.5, -2, 0.2, 1.5, 0.3, -0.5});
  Fill(labels, {2}, {0, 1});
}

TEST(HingeLossLayer, HandWorkedL1AndL2) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> x, labels, loss;
    FillHinge(&x, &labels);
    auto l1 = Make<T>("name: 'l' type: 'HingeLoss'");  // L1 by default
    ForwardBackward<T>(l1.get(), {&x, &labels}, {&loss}, T(1), {true, false});
    EXPECT_NEAR(loss.cpu_data()[0], 5.4 / 2, 1e-6);
    // t / N where the margin is active, 0 where it is not.
    ExpectNear(x.cpu_diff(), {-0.5, 0, 0.5, 0.5, -0.5, 0.5}, 1e-6, "L1 dx");
    auto l2 = Make<T>("name: 'l' type: 'HingeLoss' hinge_loss_param { norm: L2 }");
    ForwardBackward<T>(l2.get(), {&x, &labels}, {&loss}, T(1), {true, false});
    EXPECT_NEAR(loss.cpu_data()[0], 8.68 / 2, 1e-5);
    ExpectNear(x.cpu_diff(), {-0.5, 0, 1.2, 2.5, -0.7, 0.5}, 1e-6, "L2 dx");  // 2 m t / N
  };
  run(0.0);
  run(0.0f);
}

TEST(HingeLossLayer, Gradient) {
  for (const char* norm : {"L1", "L2"}) {
    SCOPED_TRACE(norm);
    Blob<double> x({4, 5, 1, 1}), labels({4, 1}), loss;
    FillUniform(&x, -2.0, 2.0);
    // Keep clear of the kinks at x = +-1 (where a margin starts), which finite differences would straddle.
    for (int i = 0; i < x.count(); ++i) {
      double& v = x.mutable_cpu_data()[i];
      if (std::fabs(std::fabs(v) - 1) < 0.05) v *= 1.2;
    }
    const double l[] = {0, 4, 2, 1};
    std::copy(l, l + 4, labels.mutable_cpu_data());
    auto layer = Make<double>(std::string("name: 'l' type: 'HingeLoss' hinge_loss_param { norm: ") + norm + " }");
    GradientChecker<double> checker(1e-4, 1e-7);
    checker.CheckGradient(layer.get(), {&x, &labels}, {&loss}, 0);
  }
}

TEST(HingeLossLayer, BadInputs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {3.0, -1.0, nan}) {
    Blob<double> x, labels, loss;
    FillHinge(&x, &labels);
    labels.mutable_cpu_data()[1] = bad;
    auto layer = Make<double>("name: 'l' type: 'HingeLoss'");
    layer->SetUp({&x, &labels}, {&loss});
    std::ostringstream value;
    value << "batch item 1 has label " << bad << ", not a class index in [0, 3)";
    ExpectError([&] { layer->Forward({&x, &labels}, {&loss}); }, {"layer 'l' (HingeLoss)", value.str()});
  }
  Blob<float> x({2, 3}), labels({2, 2}), loss;
  auto layer = Make<float>("name: 'l' type: 'HingeLoss'");
  ExpectError([&] { layer->SetUp({&x, &labels}, {&loss}); }, {"one class per item (2)", "2 2 (4)"});
  labels.Reshape({2});
  layer->SetUp({&x, &labels}, {&loss});
  layer->Forward({&x, &labels}, {&loss});
  EXPECT_EQ(layer->LabelBottom(), 1);
  ExpectError([&] { layer->Backward({&loss}, {true, true}, {&x, &labels}); }, {"cannot backpropagate to its labels"});
}

// ---------------------------------------------------------------------------------------------------------------
// MultinomialLogisticLoss

TEST(MultinomialLogisticLossLayer, HandWorkedWithTheClamp) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> p, labels, loss;
    Fill(&p, {2, 3}, {0.2, 0.5, 0.3, 0.1, 0, 0.9});
    Fill(&labels, {2, 1, 1, 1}, {1, 1});
    auto layer = Make<T>("name: 'l' type: 'MultinomialLogisticLoss'");
    ForwardBackward<T>(layer.get(), {&p, &labels}, {&loss}, T(1), {true, false});
    // Item 1's probability 0 is clamped to Caffe's kLOG_THRESHOLD, the float 1e-20.
    const double threshold = static_cast<T>(1e-20f);
    EXPECT_NEAR(loss.cpu_data()[0], (std::log(2.0) - std::log(threshold)) / 2, 1e-5);
    // -w / (N max(p, 1e-20)) at the labels.
    EXPECT_NEAR(p.cpu_diff()[1], -1.0, 1e-6);
    EXPECT_NEAR(p.cpu_diff()[4] / (-0.5 / threshold), 1.0, 1e-6);
    for (int i : {0, 2, 3, 5}) EXPECT_EQ(p.cpu_diff()[i], 0) << i;
  };
  run(0.0);
  run(0.0f);
}

TEST(MultinomialLogisticLossLayer, Gradient) {
  Blob<double> p({4, 5}), labels({4}), loss;
  FillUniform(&p, 0.1, 1.0);
  const double l[] = {0, 4, 2, 2};
  std::copy(l, l + 4, labels.mutable_cpu_data());
  auto layer = Make<double>("name: 'l' type: 'MultinomialLogisticLoss'");
  GradientChecker<double> checker(1e-5, 1e-6);
  checker.CheckGradient(layer.get(), {&p, &labels}, {&loss}, 0);
}

TEST(MultinomialLogisticLossLayer, BadInputs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {3.0, -1.0, 1e10, nan}) {
    Blob<double> p({2, 3}), labels({2}), loss;
    FillUniform(&p, 0.1, 1.0);
    labels.mutable_cpu_data()[0] = 2;
    labels.mutable_cpu_data()[1] = bad;
    auto layer = Make<double>("name: 'l' type: 'MultinomialLogisticLoss'");
    layer->SetUp({&p, &labels}, {&loss});
    std::ostringstream value;
    value << "batch item 1 has label " << bad << ", not a class index in [0, 3)";
    ExpectError([&] { layer->Forward({&p, &labels}, {&loss}); }, {"layer 'l' (MultinomialLogisticLoss)", value.str()});
  }
  Blob<float> p({2, 3}), labels({2, 3}), loss;
  auto layer = Make<float>("name: 'l' type: 'MultinomialLogisticLoss'");
  ExpectError([&] { layer->SetUp({&p, &labels}, {&loss}); }, {"one class per item", "2 3 (6)"});
  labels.Reshape({2});
  layer->SetUp({&p, &labels}, {&loss});
  layer->Forward({&p, &labels}, {&loss});
  EXPECT_FALSE(layer->AllowForceBackward(1));
  ExpectError([&] { layer->Backward({&loss}, {true, true}, {&p, &labels}); }, {"cannot backpropagate to its labels"});
}

// ---------------------------------------------------------------------------------------------------------------
// InfogainLoss

// Scores (2, 3) with softmax rows (1/4, 1/2, 1/4) and (1/4, 1/4, 1/2), labels 0 and 2, and
//   H = | 1    0.5  0 |      row sums 1.5, 2, 1.25
//       | 0    2    0 |
//       | 0.25 0    1 |
template <typename T>
void FillInfogain(Blob<T>* x, Blob<T>* labels, Blob<T>* H) {
  Fill(x, {2, 3}, {0, std::log(2.0), 0, 0, 0, std::log(2.0)});
  Fill(labels, {2}, {0, 2});
  Fill(H, {1, 1, 3, 3}, {1, 0.5, 0, 0, 2, 0, 0.25, 0, 1});
}

// Position 0: -(1 log 1/4 + 0.5 log 1/2) = 2.5 ln 2; position 1: -(0.25 log 1/4 + log 1/2) = 1.5 ln 2; over 2 (VALID).
const double kInfogainLoss = 2 * std::log(2.0);
// (p sum_j H[label, j] - H[label, :]) / 2 at each position.
const std::vector<double> kInfogainGrad = {-0.3125, 0.125, 0.1875, 0.03125, 0.15625, -0.1875};

TEST(InfogainLossLayer, HandWorkedWithMatrixBottom) {
  auto run = [](auto zero) {
    using T = decltype(zero);
    Blob<T> x, labels, H, loss, prob;
    FillInfogain(&x, &labels, &H);
    auto layer = Make<T>("name: 'l' type: 'InfogainLoss'");
    ForwardBackward<T>(layer.get(), {&x, &labels, &H}, {&loss, &prob}, T(1), {true, false, false});
    EXPECT_NEAR(loss.cpu_data()[0], kInfogainLoss, 1e-6);
    ASSERT_EQ(prob.shape(), x.shape());
    ExpectNear(prob.cpu_data(), {0.25, 0.5, 0.25, 0.25, 0.25, 0.5}, 1e-6, "probabilities");
    ExpectNear(x.cpu_diff(), kInfogainGrad, 1e-6, "dx");
    EXPECT_EQ(layer->loss(0), T(1));
    EXPECT_EQ(layer->loss(1), T(0));  // the probabilities weigh nothing by default
  };
  run(0.0);
  run(0.0f);
}

// H from infogain_loss_param.source, a binary BlobProto as Caffe writes it, gives the same.
TEST(InfogainLossLayer, MatrixFromSourceFile) {
  testing_data::TempDir dir;
  Blob<double> x, labels, H, loss;
  FillInfogain(&x, &labels, &H);
  BlobProto proto;
  H.ToProto(&proto);
  WriteProtoToBinaryFile(proto, dir / "H.binaryproto");
  auto layer = Make<double>("name: 'l' type: 'InfogainLoss' infogain_loss_param { source: '" +
                            (dir / "H.binaryproto") + "' }");
  ForwardBackward<double>(layer.get(), {&x, &labels}, {&loss}, 3.0, {true, false});
  EXPECT_NEAR(loss.cpu_data()[0], kInfogainLoss, 1e-12);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(x.cpu_diff()[i], 3 * kInfogainGrad[i], 1e-12) << i;
  // Caffe's legacy 4-d fields (num, channels, height, width) are read too.
  BlobProto legacy;
  legacy.set_num(1);
  legacy.set_channels(1);
  legacy.set_height(3);
  legacy.set_width(3);
  for (int i = 0; i < 9; ++i) legacy.add_data(static_cast<float>(H.cpu_data()[i]));
  WriteProtoToBinaryFile(legacy, dir / "legacy.binaryproto");
  auto from_legacy = Make<double>("name: 'l' type: 'InfogainLoss' infogain_loss_param { source: '" +
                                  (dir / "legacy.binaryproto") + "' }");
  from_legacy->SetUp({&x, &labels}, {&loss});
  from_legacy->Forward({&x, &labels}, {&loss});
  EXPECT_NEAR(loss.cpu_data()[0], kInfogainLoss, 1e-12);
}

// With H = I the layer is SoftmaxWithLoss: same loss and gradient, spatial labels, ignore_label, every mode.
TEST(InfogainLossLayer, IdentityMatrixIsSoftmaxWithLoss) {
  for (const char* mode : kModeNames) {
    SCOPED_TRACE(mode);
    const std::string loss_param = std::string("loss_param { ignore_label: 5 normalization: ") + mode + " }";
    Blob<double> x({3, 4, 2}), labels({3, 2}), H({4, 4}), loss;
    FillUniform(&x, -2.0, 2.0);
    const double l[] = {0, 3, 5, 1, 2, 5};  // two ignored
    std::copy(l, l + 6, labels.mutable_cpu_data());
    for (int i = 0; i < 4; ++i) H.mutable_cpu_data()[i * 4 + i] = 1;
    auto infogain = Make<double>("name: 'l' type: 'InfogainLoss' " + loss_param);
    ForwardBackward<double>(infogain.get(), {&x, &labels, &H}, {&loss}, 1.0, {true, false, false});
    const double infogain_loss = loss.cpu_data()[0];
    const std::vector<double> infogain_dx(x.cpu_diff(), x.cpu_diff() + x.count());
    auto softmax = Make<double>("name: 'l' type: 'SoftmaxWithLoss' " + loss_param);
    ForwardBackward<double>(softmax.get(), {&x, &labels}, {&loss}, 1.0, {true, false});
    EXPECT_GT(infogain_loss, 0);
    EXPECT_NEAR(infogain_loss, loss.cpu_data()[0], 1e-12);
    ExpectNear(infogain_dx.data(), std::vector<double>(x.cpu_diff(), x.cpu_diff() + x.count()), 1e-12, "dx");
  }
}

TEST(InfogainLossLayer, NormalizationModesWithIgnoreLabel) {
  // Scores (2, 3, 2): four positions, one of them (item 0, position 1) ignored.
  const struct {
    const char* mode;
    double normaliser;
  } cases[] = {{"VALID", 3}, {"FULL", 4}, {"BATCH_SIZE", 2}, {"NONE", 1}};
  double sum = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    Blob<double> x({2, 3, 2}), labels, H({3, 3}), loss;
    FillUniform(&x, -1.0, 1.0);
    Fill(&labels, {2, 2}, {2, -1, 0, 1});
    FillUniform(&H, 0.0, 1.0, 3);
    auto layer = Make<double>(std::string("name: 'l' type: 'InfogainLoss' loss_param { ignore_label: -1 "
                                          "normalization: ") +
                              c.mode + " }");
    ForwardBackward<double>(layer.get(), {&x, &labels, &H}, {&loss}, 1.0, {true, false, false});
    if (c.normaliser == 3) sum = 3 * loss.cpu_data()[0];
    EXPECT_NEAR(loss.cpu_data()[0], sum / c.normaliser, 1e-12);
    for (int ch = 0; ch < 3; ++ch) EXPECT_EQ(x.cpu_diff()[ch * 2 + 1], 0.0) << "ignored position, class " << ch;
    GradientChecker<double> checker(1e-4, 1e-7);
    checker.CheckGradient(layer.get(), {&x, &labels, &H}, {&loss}, 0);
  }
  // The hand-worked sum, from the softmax of each position.
  Blob<double> x({2, 3, 2}), H({3, 3});
  FillUniform(&x, -1.0, 1.0);
  FillUniform(&H, 0.0, 1.0, 3);
  const int label[2][2] = {{2, -1}, {0, 1}};
  double want = 0;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 2; ++i) {
      if (label[n][i] < 0) continue;
      double z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(x.cpu_data()[n * 6 + c * 2 + i]);
      for (int c = 0; c < 3; ++c) {
        want -= H.cpu_data()[label[n][i] * 3 + c] * std::log(std::exp(x.cpu_data()[n * 6 + c * 2 + i]) / z);
      }
    }
  }
  EXPECT_NEAR(sum, want, 1e-12);
}

TEST(InfogainLossLayer, GradientLastAxisAndFromFile) {
  testing_data::TempDir dir;
  Blob<double> H({4, 4});
  FillUniform(&H, 0.0, 2.0, 4);
  BlobProto proto;
  H.ToProto(&proto);
  WriteProtoToBinaryFile(proto, dir / "H.binaryproto");
  Blob<double> x({2, 3, 4}), labels({2, 3}), loss;
  FillUniform(&x, -2.0, 2.0);
  const double l[] = {0, 3, 2, 1, 1, 0};
  std::copy(l, l + 6, labels.mutable_cpu_data());
  auto layer = Make<double>("name: 'l' type: 'InfogainLoss' infogain_loss_param { axis: -1 source: '" +
                            (dir / "H.binaryproto") + "' }");
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(layer.get(), {&x, &labels}, {&loss}, 0);
}

TEST(InfogainLossLayer, BadInputs) {
  Blob<float> x, labels, H, loss;
  FillInfogain(&x, &labels, &H);
  // No H at all.
  auto no_h = Make<float>("name: 'l' type: 'InfogainLoss'");
  ExpectError([&] { no_h->SetUp({&x, &labels}, {&loss}); },
              {"layer 'l' (InfogainLoss)", "infogain_loss_param.source", "third bottom"});
  // A source that is not there.
  auto missing = Make<float>("name: 'l' type: 'InfogainLoss' infogain_loss_param { source: '/nonexistent/H.bin' }");
  ExpectError([&] { missing->SetUp({&x, &labels}, {&loss}); },
              {"layer 'l' (InfogainLoss)", "infogain_loss_param.source", "/nonexistent/H.bin"});
  // A source that is no BlobProto.
  testing_data::TempDir dir;
  {
    std::ofstream junk(dir / "junk.binaryproto", std::ios::binary);
    junk << "\xff\xff\xff not a proto";
  }
  auto corrupt = Make<float>("name: 'l' type: 'InfogainLoss' infogain_loss_param { source: '" +
                             (dir / "junk.binaryproto") + "' }");
  ExpectError([&] { corrupt->SetUp({&x, &labels}, {&loss}); }, {"infogain_loss_param.source", "junk.binaryproto"});
  // H of the wrong size, as a bottom and from a file.
  Blob<float> small({2, 2});
  auto layer = Make<float>("name: 'l' type: 'InfogainLoss'");
  ExpectError([&] { layer->SetUp({&x, &labels, &small}, {&loss}); }, {"K x K values for the K = 3", "bottom 2"});
  BlobProto proto;
  small.ToProto(&proto);
  WriteProtoToBinaryFile(proto, dir / "small.binaryproto");
  auto small_file = Make<float>("name: 'l' type: 'InfogainLoss' infogain_loss_param { source: '" +
                                (dir / "small.binaryproto") + "' }");
  ExpectError([&] { small_file->SetUp({&x, &labels}, {&loss}); }, {"K x K values", "small.binaryproto"});
  // Labels that do not match the predictions.
  Blob<float> spatial({2, 3, 2}), two_labels({2});
  ExpectError([&] { layer->SetUp({&spatial, &two_labels, &H}, {&loss}); }, {"need 4 labels, got 2"});
  // The deprecated normalize.
  auto normalize = Make<float>("name: 'l' type: 'InfogainLoss' loss_param { normalize: true }");
  ExpectError([&] { normalize->SetUp({&x, &labels, &H}, {&loss}); }, {"normalize is deprecated"});
  // A label that is no class.
  labels.mutable_cpu_data()[1] = 3;
  layer->SetUp({&x, &labels, &H}, {&loss});
  ExpectError([&] { layer->Forward({&x, &labels, &H}, {&loss}); },
              {"layer 'l' (InfogainLoss): batch item 1 has label 3, not a class index in [0, 3)"});
  // No gradient into the labels or H, even under force_backward.
  labels.mutable_cpu_data()[1] = 2;
  layer->Forward({&x, &labels, &H}, {&loss});
  EXPECT_FALSE(layer->AllowForceBackward(1));
  EXPECT_FALSE(layer->AllowForceBackward(2));
  ExpectError([&] { layer->Backward({&loss}, {true, false, true}, {&x, &labels, &H}); },
              {"cannot backpropagate to its infogain matrix H (bottom 2)"});
  ExpectError([&] { layer->Backward({&loss}, {true, true, false}, {&x, &labels, &H}); }, {"labels (bottom 1)"});
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs large enough for the sums and the backward loops to run on several threads give what one thread gives.
TEST(LossLayersCatalogue, ThreadedMatchesOneThread) {
  const int saved = compute_threads();
  const struct {
    const char* prototxt;
    std::vector<std::vector<int>> shapes;
    int labels;  // the bottom holding labels in [0, classes), or -1
    int classes;
  } cases[] = {
      {"name: 'l' type: 'EuclideanLoss'", {{64, 5000}, {64, 5000}}, -1, 0},
      {"name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 2 normalization: VALID }",
       {{64, 5000}, {64, 5000}}, 1, 3},
      {"name: 'l' type: 'ContrastiveLoss' contrastive_loss_param { margin: 40 }", {{64, 5000}, {64, 5000}, {64}}, 2,
       2},
      {"name: 'l' type: 'HingeLoss' hinge_loss_param { norm: L2 }", {{64, 5000}, {64}}, 1, 5000},
      {"name: 'l' type: 'MultinomialLogisticLoss'", {{64, 5000}, {64}}, 1, 5000},
      {"name: 'l' type: 'InfogainLoss' loss_param { ignore_label: 0 }", {{16, 50, 400}, {16, 400}, {50, 50}}, 1, 50},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.prototxt);
    std::vector<std::vector<double>> results[2];
    for (int threads : {1, 2}) {
      set_compute_threads(threads);
      std::vector<std::unique_ptr<Blob<double>>> blobs;
      std::vector<Blob<double>*> bottom;
      for (size_t b = 0; b < c.shapes.size(); ++b) {
        blobs.emplace_back(new Blob<double>(c.shapes[b]));
        FillUniform(blobs.back().get(), 0.01, 1.0, 10 + static_cast<unsigned>(b));
        if (static_cast<int>(b) == c.labels) {
          double* l = blobs.back()->mutable_cpu_data();
          for (int i = 0; i < blobs.back()->count(); ++i) l[i] = static_cast<double>((i * 7919LL) % c.classes);
        }
        bottom.push_back(blobs.back().get());
      }
      Blob<double> loss;
      auto layer = Make<double>(c.prototxt);
      std::vector<bool> down(bottom.size(), false);
      down[0] = true;
      ForwardBackward<double>(layer.get(), bottom, {&loss}, 1.0, down);
      results[threads - 1] = {{loss.cpu_data()[0]}, {bottom[0]->cpu_diff(), bottom[0]->cpu_diff() + bottom[0]->count()}};
    }
    EXPECT_NEAR(results[1][0][0], results[0][0][0], 1e-12 * std::fabs(results[0][0][0]));
    EXPECT_EQ(results[1][1], results[0][1]);  // element-wise: the same bits
  }
  set_compute_threads(saved);
}

// ---------------------------------------------------------------------------------------------------------------
// In a Net: every one counts as a loss of weight 1 without saying so, and only its gradient-taking bottoms get one
// under force_backward.
TEST(LossLayersCatalogue, InNet) {
  NetParameter param;
  ReadProtoFromTextString(R"(
    force_backward: true
    layer { name: "in" type: "Input" top: "a" top: "b" top: "sim" top: "label" top: "H"
            input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } shape { dim: 2 } shape { dim: 2 }
                          shape { dim: 3 dim: 3 } } }
    layer { name: "euclid" type: "EuclideanLoss" bottom: "a" bottom: "b" top: "euclid" }
    layer { name: "contrast" type: "ContrastiveLoss" bottom: "a" bottom: "b" bottom: "sim" top: "contrast" }
    layer { name: "sce" type: "SigmoidCrossEntropyLoss" bottom: "a" bottom: "b" top: "sce" }
    layer { name: "hinge" type: "HingeLoss" bottom: "a" bottom: "label" top: "hinge" }
    layer { name: "mll" type: "MultinomialLogisticLoss" bottom: "b" bottom: "label" top: "mll" }
    layer { name: "infogain" type: "InfogainLoss" bottom: "a" bottom: "label" bottom: "H" top: "infogain" }
  )",
                          &param, "test.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Net<double> net(param);
  for (const char* name : {"euclid", "contrast", "sce", "hinge", "mll", "infogain"}) {
    const auto it = std::find(net.blob_names().begin(), net.blob_names().end(), name);
    ASSERT_NE(it, net.blob_names().end()) << name;
    EXPECT_EQ(net.blob_loss_weights()[it - net.blob_names().begin()], 1.0) << name;
  }
  // Per layer (after the Input and the Splits the Net inserts), which bottoms get a gradient.
  const std::vector<std::pair<std::string, std::vector<bool>>> want = {
      {"euclid", {true, true}},         {"contrast", {true, true, false}}, {"sce", {true, false}},
      {"hinge", {true, false}},         {"mll", {true, false}},            {"infogain", {true, false, false}}};
  for (const auto& w : want) {
    const auto it = std::find(net.layer_names().begin(), net.layer_names().end(), w.first);
    ASSERT_NE(it, net.layer_names().end()) << w.first;
    const int id = static_cast<int>(it - net.layer_names().begin());
    for (size_t b = 0; b < w.second.size(); ++b) {
      EXPECT_EQ(net.bottom_need_backward()[id][b], w.second[b]) << w.first << " bottom " << b;
    }
  }
  Blob<double>* a = net.input_blobs()[0];
  FillUniform(a, -1.0, 1.0, 1);
  FillUniform(net.input_blobs()[1], 0.1, 1.0, 2);
  const double sim[] = {1, 0}, label[] = {2, 0};
  std::copy(sim, sim + 2, net.input_blobs()[2]->mutable_cpu_data());
  std::copy(label, label + 2, net.input_blobs()[3]->mutable_cpu_data());
  FillUniform(net.input_blobs()[4], 0.0, 1.0, 3);
  double loss = 0;
  net.Forward(&loss);
  double sum = 0;
  for (const char* name : {"euclid", "contrast", "sce", "hinge", "mll", "infogain"}) {
    sum += net.blob_by_name(name)->cpu_data()[0];
  }
  EXPECT_NEAR(loss, sum, 1e-12);
  net.Backward();
}

}  // namespace
}  // namespace strata
