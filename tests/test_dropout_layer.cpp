#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "strata/layers/dropout_layer.hpp"

namespace strata {
namespace {

LayerParameter DropoutParam(float ratio, Phase phase) {
  LayerParameter p;
  p.set_name("drop");
  p.set_type("Dropout");
  p.set_phase(phase);
  p.mutable_dropout_param()->set_dropout_ratio(ratio);
  return p;
}

TEST(DropoutLayer, TestPhaseIsIdentity) {
  Blob<float> x({2, 3, 4}), y, dy({2, 3, 4});
  FillUniform(&x, -1.0f, 1.0f);
  FillUniform(&dy, -1.0f, 1.0f, 7);
  DropoutLayer<float> layer(DropoutParam(0.5f, TEST));
  EXPECT_FALSE(layer.IsStochastic());
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), x.shape());
  for (int i = 0; i < x.count(); ++i) EXPECT_EQ(y.cpu_data()[i], x.cpu_data()[i]);
  cpu_copy(dy.count(), dy.cpu_data(), y.mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  for (int i = 0; i < x.count(); ++i) EXPECT_EQ(x.cpu_diff()[i], dy.cpu_data()[i]);
}

// Every kept value is scaled by 1 / (1 - ratio), every other is 0, the backward uses the same mask, and the
// kept fraction is 1 - ratio (within 5 standard deviations).
TEST(DropoutLayer, TrainKeepsScaledValues) {
  for (float ratio : {0.5f, 0.2f, 0.9f}) {
    const int n = 3 * 100 * 129;  // large enough for the multi-threaded path; odd count
    Blob<float> x({3, 100, 129}), y;
    FillUniform(&x, 0.5f, 1.5f);  // never 0, so a zero output means dropped
    DropoutLayer<float> layer(DropoutParam(ratio, TRAIN));
    EXPECT_TRUE(layer.IsStochastic());
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    cpu_set(n, 1.0f, y.mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    const float scale = 1.0f / (1.0f - ratio);
    int kept = 0;
    for (int i = 0; i < n; ++i) {
      const float v = y.cpu_data()[i];
      if (v == 0) {
        ASSERT_EQ(x.cpu_diff()[i], 0.0f) << i;
      } else {
        ++kept;
        ASSERT_FLOAT_EQ(v, x.cpu_data()[i] * scale) << i;
        ASSERT_FLOAT_EQ(x.cpu_diff()[i], scale) << i;
      }
    }
    const double p = 1.0 - ratio;
    EXPECT_NEAR(static_cast<double>(kept) / n, p, 5 * std::sqrt(p * (1 - p) / n)) << "ratio " << ratio;
  }
}

TEST(DropoutLayer, ZeroRatioKeepsEverything) {
  Blob<float> x({5, 7}), y;
  FillUniform(&x, -1.0f, 1.0f);
  DropoutLayer<float> layer(DropoutParam(0.0f, TRAIN));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  for (int i = 0; i < x.count(); ++i) EXPECT_EQ(y.cpu_data()[i], x.cpu_data()[i]);
}

// Reseeding the thread's engine replays the mask; another seed gives another mask; the number of threads does
// not change it.
TEST(DropoutLayer, SeedReplaysMask) {
  Blob<float> x({4, 100, 100}), y;
  cpu_set(x.count(), 1.0f, x.mutable_cpu_data());
  DropoutLayer<float> layer(DropoutParam(0.5f, TRAIN));
  layer.SetUp({&x}, {&y});
  auto run = [&](unsigned seed) {
    Strata::set_random_seed(seed);
    layer.Forward({&x}, {&y});
    return std::vector<float>(y.cpu_data(), y.cpu_data() + y.count());
  };
  const std::vector<float> a = run(42);
  EXPECT_EQ(run(42), a);
  EXPECT_NE(run(43), a);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one_thread = run(42);
  omp_set_num_threads(threads);
  EXPECT_EQ(one_thread, a);
}

TEST(DropoutLayer, Gradient) {
  for (float ratio : {0.5f, 0.3f}) {
    Blob<double> x({2, 3, 3, 3}), y;
    FillUniform(&x, -1.0, 1.0);
    DropoutLayer<double> layer(DropoutParam(ratio, TRAIN));
    GradientChecker<double> checker(1e-4, 1e-7, 99);  // reseeds before each forward: the mask replays
    checker.CheckGradient(&layer, {&x}, {&y});
  }
}

TEST(DropoutLayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(DropoutParam(0.5f, TRAIN), {3, 4, 5});
  ExpectInPlaceMatchesOutOfPlace(DropoutParam(0.5f, TEST), {3, 4, 5});
}

TEST(DropoutLayer, BadRatioIsAnError) {
  Blob<float> x({2, 2}), y;
  for (float ratio : {1.0f, -0.1f, 1.5f}) {
    DropoutLayer<float> layer(DropoutParam(ratio, TRAIN));
    EXPECT_THROW(layer.SetUp({&x}, {&y}), Error) << ratio;
  }
}

TEST(DropoutLayer, RecomputeHints) {
  DropoutLayer<float> layer(DropoutParam(0.5f, TRAIN));
  EXPECT_FALSE(layer.BackwardNeedsBottomData());
  EXPECT_FALSE(layer.BackwardNeedsTopData());
}

}  // namespace
}  // namespace strata
