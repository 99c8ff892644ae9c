#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "layer_engines.hpp"
#include "strata/layers/batch_norm_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter BnParam(Phase phase, float maf = 0.999f, float eps = 1e-5f) {
  LayerParameter p;
  p.set_name("bn");
  p.set_type("BatchNorm");
  p.set_phase(phase);
  p.mutable_batch_norm_param()->set_moving_average_fraction(maf);
  p.mutable_batch_norm_param()->set_eps(eps);
  return p;
}

LayerParameter GlobalStatsParam(bool use_global_stats) {
  LayerParameter p = BnParam(TRAIN);
  p.mutable_batch_norm_param()->set_use_global_stats(use_global_stats);
  return p;
}

// (N, C, S) = (2, 2, 2): channel 0 holds 1, 3 | 5, 7 (mean 4, biased variance 5); channel 1 holds
// 0, 0 | 2, 2 (mean 1, variance 1).
TEST(BatchNormLayer, HandWorkedTrainForward) {
  Blob<double> x({2, 2, 1, 2}), y;
  SetValues(&x, {1, 3, 0, 0, 5, 7, 2, 2});
  BatchNormLayer<double> layer(BnParam(TRAIN, 0.5f, 0.0f));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), x.shape());
  const double s5 = std::sqrt(5.0);
  ExpectValues(y.cpu_data(), {-3 / s5, -1 / s5, -1, -1, 1 / s5, 3 / s5, 1, 1}, 1e-12);
}

TEST(BatchNormLayer, RunningStatisticsAfterTwoForwards) {
  Blob<double> x({2, 2, 1, 2}), y;
  BatchNormLayer<double> layer(BnParam(TRAIN, 0.5f));
  SetValues(&x, {1, 3, 0, 0, 5, 7, 2, 2});
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  // factor = 0 * 0.5 + 1; mean = 0 + (4, 1); variance = 0 + 4/3 * (5, 1)  (m = 4: unbiased).
  EXPECT_DOUBLE_EQ(layer.blobs()[2]->cpu_data()[0], 1);
  ExpectValues(layer.blobs()[0]->cpu_data(), {4, 1}, 1e-12);
  ExpectValues(layer.blobs()[1]->cpu_data(), {20.0 / 3, 4.0 / 3}, 1e-12);

  // Channel 0: 2, 2 | 2, 2 (mean 2, variance 0); channel 1: 1, -1 | 3, -3 (mean 0, variance 5).
  SetValues(&x, {2, 2, 1, -1, 2, 2, 3, -3});
  layer.Forward({&x}, {&y});
  EXPECT_DOUBLE_EQ(layer.blobs()[2]->cpu_data()[0], 1.5);
  ExpectValues(layer.blobs()[0]->cpu_data(), {0.5 * 4 + 2, 0.5 * 1 + 0}, 1e-12);
  ExpectValues(layer.blobs()[1]->cpu_data(), {0.5 * 20 / 3 + 0, 0.5 * 4 / 3 + 4.0 / 3 * 5}, 1e-12);
  // A constant channel normalises to 0.
  ExpectValues(y.cpu_data(), {0, 0}, 1e-9);

  // The same blobs used as global statistics: mean = (4, 0.5) / 1.5, variance = (10/3, 22/3) / 1.5.
  BatchNormLayer<double> test_layer(BnParam(TEST, 0.5f, 0.0f));
  for (int i = 0; i < 3; ++i) {
    test_layer.blobs().push_back(std::make_shared<Blob<double>>(layer.blobs()[i]->shape()));
    test_layer.blobs()[i]->CopyFrom(*layer.blobs()[i]);
  }
  Blob<double> x2({1, 2}), y2;
  SetValues(&x2, {6, 1});
  test_layer.SetUp({&x2}, {&y2});
  test_layer.Forward({&x2}, {&y2});
  ExpectValues(y2.cpu_data(), {(6 - 8.0 / 3) / std::sqrt(20.0 / 9), (1 - 1.0 / 3) / std::sqrt(44.0 / 9)}, 1e-12);
  // Running statistics do not move under global stats.
  EXPECT_DOUBLE_EQ(test_layer.blobs()[2]->cpu_data()[0], 1.5);
}

TEST(BatchNormLayer, GlobalStatsDefaultsByPhase) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, 2, 3, 4, 5, 6});
  // TEST phase: global statistics; with a zero factor, mean and variance read as 0, so y = x / sqrt(eps).
  BatchNormLayer<double> test_layer(BnParam(TEST, 0.999f, 0.25f));
  test_layer.SetUp({&x}, {&y});
  EXPECT_FALSE(test_layer.IsStochastic());
  test_layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {2, 4, 6, 8, 10, 12}, 1e-6);
  // TRAIN phase: batch statistics, and the forward pass changes state.
  BatchNormLayer<double> train_layer(BnParam(TRAIN));
  train_layer.SetUp({&x}, {&y});
  EXPECT_TRUE(train_layer.IsStochastic());
  train_layer.Forward({&x}, {&y});
  EXPECT_NEAR(y.cpu_data()[0], -1, 1e-5);
  // use_global_stats overrides the phase either way.
  BatchNormLayer<double> forced(GlobalStatsParam(true));
  forced.SetUp({&x}, {&y});
  EXPECT_FALSE(forced.IsStochastic());
}

TEST(BatchNormLayer, StatisticsAreNeverLearned) {
  Blob<float> x({2, 3, 2}), y;
  BatchNormLayer<float> layer(BnParam(TRAIN));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.layer_param().param_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(layer.layer_param().param(i).lr_mult(), 0);
    EXPECT_TRUE(layer.ParamIsStatistic(i));
  }
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{3}));
  EXPECT_EQ(layer.blobs()[2]->shape(), (std::vector<int>{1}));
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
  EXPECT_FALSE(layer.BackwardNeedsTopData());

  // A given lr_mult 0 is kept with its other fields; any other lr_mult is refused.
  LayerParameter p = BnParam(TRAIN);
  p.add_param()->set_lr_mult(0);
  p.mutable_param(0)->set_decay_mult(0);
  BatchNormLayer<float> given(p);
  given.SetUp({&x}, {&y});
  EXPECT_EQ(given.layer_param().param_size(), 3);
  EXPECT_EQ(given.layer_param().param(0).decay_mult(), 0);
  p.add_param()->set_lr_mult(1);
  EXPECT_THROW(BatchNormLayer<float>(p).SetUp({&x}, {&y}), Error);
  LayerParameter unset = BnParam(TRAIN);
  unset.add_param();  // lr_mult defaults to 1
  EXPECT_THROW(BatchNormLayer<float>(unset).SetUp({&x}, {&y}), Error);
}

TEST(BatchNormLayer, BadInputIsAnError) {
  Blob<float> x({2, 3, 2}), y, other({2, 4, 2});
  BatchNormLayer<float> layer(BnParam(TRAIN));
  layer.SetUp({&x}, {&y});
  EXPECT_THROW(layer.Reshape({&other}, {&y}), Error);
  BatchNormLayer<float> loaded(BnParam(TEST));
  for (int n : {3, 4, 1}) loaded.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{n}));
  EXPECT_THROW(loaded.SetUp({&x}, {&y}), Error);
}

TEST(BatchNormLayer, GradientTrain) {
  Blob<double> x({3, 2, 2, 3}), y;
  FillUniform(&x, -2.0, 2.0);
  BatchNormLayer<double> layer(BnParam(TRAIN));
  GradientChecker<double> checker(1e-4, 1e-5);
  checker.CheckBottomGradients(&layer, {&x}, {&y});
}

TEST(BatchNormLayer, GradientTrain2D) {
  Blob<double> x({5, 3}), y;
  FillUniform(&x, -2.0, 2.0);
  BatchNormLayer<double> layer(BnParam(TRAIN));
  GradientChecker<double> checker(1e-4, 1e-5);
  checker.CheckBottomGradients(&layer, {&x}, {&y});
}

TEST(BatchNormLayer, GradientGlobalStats) {
  Blob<double> x({2, 3, 2, 2}), y;
  FillUniform(&x, -2.0, 2.0);
  BatchNormLayer<double> layer(GlobalStatsParam(true));
  layer.SetUp({&x}, {&y});
  SetValues(layer.blobs()[0].get(), {0.4, -1, 2});
  SetValues(layer.blobs()[1].get(), {1, 0.5, 3});
  SetValues(layer.blobs()[2].get(), {2});
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckBottomGradients(&layer, {&x}, {&y});
  // The forward pass used mean (0.2, -0.5, 1) and variance (0.5, 0.25, 1.5).
  EXPECT_NEAR(y.data_at({1, 2, 1, 0}), (x.data_at({1, 2, 1, 0}) - 1) / std::sqrt(1.5 + 1e-5), 1e-6);
}

// In place, the layer must give the same output, gradient and statistics as out of place.
TEST(BatchNormLayer, InPlaceMatchesOutOfPlace) {
  for (bool global : {false, true}) {
    for (const std::vector<int>& shape : {std::vector<int>{3, 4, 2, 5}, std::vector<int>{6, 3}}) {
      Blob<double> x(shape), x_in_place(shape), y, dy(shape);
      FillUniform(&x, -1.0, 3.0, 1);
      FillUniform(&dy, -1.0, 1.0, 2);
      x_in_place.CopyFrom(x);
      BatchNormLayer<double> ref(GlobalStatsParam(global)), in_place(GlobalStatsParam(global));
      ref.SetUp({&x}, {&y});
      in_place.SetUp({&x_in_place}, {&x_in_place});
      for (auto* l : {&ref, &in_place}) {
        SetValues(l->blobs()[0].get(), std::vector<double>(shape[1], 0.5));
        SetValues(l->blobs()[1].get(), std::vector<double>(shape[1], 2.0));
        SetValues(l->blobs()[2].get(), {1});
      }
      ref.Forward({&x}, {&y});
      in_place.Forward({&x_in_place}, {&x_in_place});
      for (int i = 0; i < y.count(); ++i) ASSERT_EQ(x_in_place.cpu_data()[i], y.cpu_data()[i]);
      for (int b = 0; b < 3; ++b) {
        for (int i = 0; i < ref.blobs()[b]->count(); ++i) {
          EXPECT_EQ(ref.blobs()[b]->cpu_data()[i], in_place.blobs()[b]->cpu_data()[i]);
        }
      }
      cpu_copy(y.count(), dy.cpu_data(), y.mutable_cpu_diff());
      cpu_copy(y.count(), dy.cpu_data(), x_in_place.mutable_cpu_diff());
      ref.Backward({&y}, {true}, {&x});
      in_place.Backward({&x_in_place}, {true}, {&x_in_place});
      for (int i = 0; i < y.count(); ++i) ASSERT_EQ(x_in_place.cpu_diff()[i], x.cpu_diff()[i]);
    }
  }
}

// The threaded and row-blocked paths against a plain per-channel computation.
void CheckAgainstPlain(const std::vector<int>& shape) {
  Blob<float> x(shape), y, dy(shape);
  FillUniform(&x, -1.0f, 5.0f, 3);
  FillUniform(&dy, -1.0f, 1.0f, 4);
  BatchNormLayer<float> layer(BnParam(TRAIN));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  cpu_copy(y.count(), dy.cpu_data(), y.mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  const int N = shape[0];
  const int C = shape.size() > 1 ? shape[1] : 1;
  const int S = shape.size() > 2 ? x.count(2) : 1;
  const double m = static_cast<double>(N) * S;
  for (int c = 0; c < C; ++c) {
    double sum = 0, sum_sq = 0;
    for (int n = 0; n < N; ++n)
      for (int s = 0; s < S; ++s) sum += x.cpu_data()[(n * C + c) * S + s];
    const double mean = sum / m;
    for (int n = 0; n < N; ++n)
      for (int s = 0; s < S; ++s) sum_sq += std::pow(x.cpu_data()[(n * C + c) * S + s] - mean, 2);
    const double inv_std = 1 / std::sqrt(sum_sq / m + 1e-5);
    double mean_dy = 0, mean_dy_xhat = 0;
    for (int n = 0; n < N; ++n) {
      for (int s = 0; s < S; ++s) {
        const int i = (n * C + c) * S + s;
        mean_dy += dy.cpu_data()[i] / m;
        mean_dy_xhat += dy.cpu_data()[i] * (x.cpu_data()[i] - mean) * inv_std / m;
      }
    }
    for (int n = 0; n < N; ++n) {
      for (int s = 0; s < S; ++s) {
        const int i = (n * C + c) * S + s;
        const double x_hat = (x.cpu_data()[i] - mean) * inv_std;
        ASSERT_NEAR(y.cpu_data()[i], x_hat, 1e-4) << "channel " << c;
        ASSERT_NEAR(x.cpu_diff()[i], inv_std * (dy.cpu_data()[i] - mean_dy - x_hat * mean_dy_xhat), 1e-4);
      }
    }
    EXPECT_NEAR(layer.blobs()[0]->cpu_data()[c], mean, 1e-5);
    EXPECT_NEAR(layer.blobs()[1]->cpu_data()[c], sum_sq / (m - 1), 1e-4);
  }
}

TEST(BatchNormLayer, LargeBlobsMatchPlainComputation) {
  CheckAgainstPlain({4, 8, 32, 32});
  CheckAgainstPlain({300, 130});  // rows of channels, several channel blocks
  CheckAgainstPlain({7});         // one channel
}

TEST(BatchNormLayer, FloatStatisticsOfAnOffsetInput) {
  // A mean far from 0 next to a unit spread: sum(x^2) - sum(x)^2 in float would lose the variance.
  Blob<float> x({8, 2, 16, 16}), y;
  FillUniform(&x, -1.0f, 1.0f);
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] += 1000.0f;
  BatchNormLayer<float> layer(BnParam(TRAIN, 0.999f, 0.0f));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  const int per_channel = 8 * 16 * 16;
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sum_sq = 0;
    for (int n = 0; n < 8; ++n) {
      for (int s = 0; s < 256; ++s) {
        const double v = y.cpu_data()[(n * 2 + c) * 256 + s];
        sum += v;
        sum_sq += v * v;
      }
    }
    EXPECT_NEAR(sum / per_channel, 0, 1e-4) << "channel " << c;
    EXPECT_NEAR(sum_sq / per_channel, 1, 1e-3) << "channel " << c;
  }
}

// The ResNet pattern in a real net: BatchNorm and Scale in place on one blob. The net must see the statistics
// as unlearned (lr_mult 0, no weight decay) and the parameter gradients must match finite differences of the
// net's loss, sum(scale(bn(pre(data))) * data).
TEST(BatchNormLayer, InPlaceWithScaleInANet) {
  NetParameter param;
  ReadProtoFromTextString(R"(
    layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 4 dim: 3 dim: 2 dim: 2 } } }
    layer { name: "pre" type: "Scale" bottom: "data" top: "x"
            scale_param { filler { type: "uniform" min: 0.5 max: 1.5 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x" }
    layer { name: "post" type: "Scale" bottom: "x" top: "x"
            scale_param { bias_term: true filler { type: "uniform" } bias_filler { type: "uniform" } } }
    layer { name: "prod" type: "Eltwise" bottom: "x" bottom: "data" top: "p" eltwise_param { operation: PROD } }
    layer { name: "flat" type: "Flatten" bottom: "p" top: "f" loss_weight: 1 }
  )", &param, "bn_scale.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Net<double> net(param);
  FillUniform(net.blob_by_name("data").get(), -1.0, 1.0);
  ASSERT_EQ(net.params().size(), 6u);  // pre: scale; bn: 3 statistics; post: scale, bias
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(net.params_lr()[i], 0);
    EXPECT_EQ(net.params_weight_decay()[i], 0);
    EXPECT_TRUE(net.learnable_param_is_statistic(i));
  }
  EXPECT_EQ(net.params_lr()[0], 1);
  EXPECT_FALSE(net.learnable_param_is_statistic(4));

  net.ClearParamDiffs();
  net.ForwardBackward();
  const double h = 1e-5;
  for (int p : {0, 4, 5}) {
    Blob<double>& blob = *net.params()[p];
    for (int k = 0; k < blob.count(); ++k) {
      const double v = blob.cpu_data()[k];
      double plus = 0, minus = 0;
      blob.mutable_cpu_data()[k] = v + h;
      net.Forward(&plus);
      blob.mutable_cpu_data()[k] = v - h;
      net.Forward(&minus);
      blob.mutable_cpu_data()[k] = v;
      EXPECT_NEAR(blob.cpu_diff()[k], (plus - minus) / (2 * h), 1e-6) << "param " << p << " element " << k;
    }
  }
}

// ---- On each backend: the CPU, the GPU (layer_engines.hpp) ----

STRATA_BACKEND_SUITES(BatchNorm, layer_engines::CpuAndGpu, layer_engines::GpuBesideCaffe);

TYPED_TEST(BatchNormBesideCaffe, MatchesCaffeOnCpu) {
  layer_engines::ExpectMatchesCaffeOnCpu<TypeParam>({R"(name: "bn_train" type: "BatchNorm" phase: TRAIN)",
                                                     {{4, 3, 5, 4}}});
}

// BatchNorm absorbs the channel Scale after it and then a ReLU, on every backend: the net computes what the
// separate layers compute, within float's rounding of the reordered sums.
TYPED_TEST(BatchNormOn, AbsorbingScaleAndReluChangesNothing) {
  const std::vector<std::string> absorbed = layer_engines::ExpectFusionChangesNothing<TypeParam>(R"(
      layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 4 dim: 16 dim: 5 dim: 5 } } }
      layer { name: "bn" type: "BatchNorm" bottom: "x" top: "b" }
      layer { name: "scale" type: "Scale" bottom: "b" top: "b" scale_param { bias_term: true
              filler { type: "uniform" min: 0.5 max: 1.5 } bias_filler { type: "uniform" min: -1 max: 1 } } }
      layer { name: "relu" type: "ReLU" bottom: "b" top: "b" }
      layer { name: "loss" type: "Reduction" bottom: "b" top: "loss" reduction_param { operation: SUMSQ }
              loss_weight: 1 })", 1e-5);
  EXPECT_EQ(absorbed, (std::vector<std::string>{"scale", "relu"}));
}

}  // namespace
}  // namespace strata
