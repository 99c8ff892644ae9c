// The Caffe element-wise layers beyond ReLU/Sigmoid/TanH: AbsVal, BNLL, Clip, ELU, Exp, Log, Power, PReLU,
// Swish, Threshold. Per layer: values worked by hand (forward and backward, float and double), the finite-
// difference gradient check away from kinks, in-place use (equal to out-of-place, or refused for the backward
// where the gradient needs the overwritten input), the recompute hints, and the bad configurations refused.
// The float kernels (which use the vectorisable log/log1p/expm1 of neuron_math.hpp) are swept against double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/absval_layer.hpp"
#include "strata/layers/bnll_layer.hpp"
#include "strata/layers/clip_layer.hpp"
#include "strata/layers/elu_layer.hpp"
#include "strata/layers/exp_layer.hpp"
#include "strata/layers/log_layer.hpp"
#include "strata/layers/power_layer.hpp"
#include "strata/layers/prelu_layer.hpp"
#include "strata/layers/swish_layer.hpp"
#include "strata/layers/threshold_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A LayerParameter from its text form, e.g. Param(R"(type: "Clip" clip_param { min: -1 max: 2 })").
LayerParameter Param(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString(text, &p);
  if (!p.has_name()) p.set_name(p.type());
  return p;
}

template <typename T>
std::shared_ptr<Layer<T>> Make(const LayerParameter& p) {
  return LayerRegistry<T>::CreateLayer(p);
}

// Close to `want` within `rel` of its size (and `abs`); NaN and infinities must match exactly.
void ExpectClose(double got, double want, double rel, double abs, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_NEAR(got, want, rel * std::fabs(want) + abs) << what;
  }
}

// Runs the layer forward and backward on a 1-D blob holding x, with top diff dy (ones when empty), in float and
// in double, and compares the top with y and the bottom's diff with dx (dx empty: backward not run).
struct HandCase {
  HandCase(std::vector<double> x_, std::vector<double> y_, std::vector<double> dx_, std::vector<double> dy_ = {})
      : x(std::move(x_)), y(std::move(y_)), dx(std::move(dx_)), dy(std::move(dy_)) {}
  std::vector<double> x, y, dx, dy;
};

void ExpectHandWorked(const LayerParameter& p, const HandCase& c, double rel = 1e-6) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const int n = static_cast<int>(c.x.size());
    Blob<T> x({n}), y;
    for (int i = 0; i < n; ++i) x.mutable_cpu_data()[i] = static_cast<T>(c.x[i]);
    auto layer = Make<T>(p);
    layer->SetUp({&x}, {&y});
    layer->Forward({&x}, {&y});
    ASSERT_EQ(y.shape(), x.shape());
    const std::string type = sizeof(T) == 4 ? " float" : " double";
    for (int i = 0; i < n; ++i) {
      ExpectClose(y.cpu_data()[i], c.y[i], rel, 1e-30, p.type() + type + " y[" + std::to_string(i) + "]");
    }
    if (c.dx.empty()) return;
    for (int i = 0; i < n; ++i) y.mutable_cpu_diff()[i] = static_cast<T>(c.dy.empty() ? 1.0 : c.dy[i]);
    layer->Backward({&y}, {true}, {&x});
    for (int i = 0; i < n; ++i) {
      ExpectClose(x.cpu_diff()[i], c.dx[i], rel, 1e-30, p.type() + type + " dx[" + std::to_string(i) + "]");
    }
  };
  SCOPED_TRACE(p.DebugString());
  run(0.0);
  run(0.0f);
}

// Moves the values within `margin` of a kink to 2 margins from it (same side), so that finite differences
// with a step below `margin` never straddle one.
void AvoidKinks(Blob<double>* b, const std::vector<double>& kinks, double margin = 1e-2) {
  double* v = b->mutable_cpu_data();
  for (int i = 0; i < b->count(); ++i) {
    for (double k : kinks) {
      if (std::fabs(v[i] - k) < margin) v[i] = k + (v[i] < k ? -2 : 2) * margin;
    }
  }
}

// The finite-difference check of every bottom and parameter, on inputs in [lo, hi] kept off the kinks.
void CheckGradient(const LayerParameter& p, double lo, double hi, const std::vector<double>& kinks = {},
                   const std::vector<int>& shape = {2, 3, 4, 3}, double threshold = 1e-6) {
  SCOPED_TRACE(p.DebugString());
  Blob<double> x(shape), y;
  FillUniform(&x, lo, hi, 29);
  AvoidKinks(&x, kinks);
  auto layer = Make<double>(p);
  GradientChecker<double> checker(1e-4, threshold);
  checker.CheckGradient(layer.get(), {&x}, {&y});
  EXPECT_GT(checker.last_num_checked(), 0);
}

// Forward in place gives the out-of-place output; backward in place is an Error naming the layer.
void ExpectInPlaceBackwardRefused(const LayerParameter& p, double lo = -3, double hi = 3) {
  SCOPED_TRACE(p.DebugString());
  Blob<double> x({2, 3, 4}), y, x2({2, 3, 4});
  FillUniform(&x, lo, hi, 5);
  x2.CopyFrom(x);
  auto plain = Make<double>(p);
  plain->SetUp({&x}, {&y});
  plain->Forward({&x}, {&y});
  auto inplace = Make<double>(p);
  inplace->SetUp({&x2}, {&x2});
  inplace->Forward({&x2}, {&x2});
  for (int i = 0; i < y.count(); ++i) {
    if (std::isnan(y.cpu_data()[i])) continue;
    ASSERT_EQ(x2.cpu_data()[i], y.cpu_data()[i]) << "forward, element " << i;
  }
  cpu_set(x2.count(), 1.0, x2.mutable_cpu_diff());
  try {
    inplace->Backward({&x2}, {true}, {&x2});
    ADD_FAILURE() << "in-place backward was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in place"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p.type()), std::string::npos) << e.what();
  }
}

// SetUp refuses the configuration with an Error whose message contains `needle`.
void ExpectRefused(const LayerParameter& p, const std::string& needle, const std::vector<int>& shape = {2, 3}) {
  SCOPED_TRACE(p.DebugString());
  Blob<float> x(shape), y;
  try {
    auto layer = Make<float>(p);
    layer->SetUp({&x}, {&y});
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void ExpectHints(const LayerParameter& p, bool bottom, bool top) {
  auto layer = Make<float>(p);
  EXPECT_EQ(layer->BackwardNeedsBottomData(), bottom) << p.DebugString();
  EXPECT_EQ(layer->BackwardNeedsTopData(), top) << p.DebugString();
}

// The float layer against the double one, element by element, over `n` inputs from `input(i)` (large enough
// for the multi-threaded path): |float - double| <= rel |double| + abs for the top, and + grad_abs (default
// abs) for the bottom's diff (dy = 1).
void ExpectFloatMatchesDouble(const LayerParameter& p, int n, const std::function<double(int)>& input, double rel,
                              double abs, double grad_abs = -1) {
  if (grad_abs < 0) grad_abs = abs;
  SCOPED_TRACE(p.DebugString());
  Blob<float> xf({n}), yf;
  Blob<double> xd({n}), yd;
  for (int i = 0; i < n; ++i) {
    xf.mutable_cpu_data()[i] = static_cast<float>(input(i));
    xd.mutable_cpu_data()[i] = xf.cpu_data()[i];
  }
  auto lf = Make<float>(p);
  auto ld = Make<double>(p);
  lf->SetUp({&xf}, {&yf});
  ld->SetUp({&xd}, {&yd});
  lf->Forward({&xf}, {&yf});
  ld->Forward({&xd}, {&yd});
  for (int i = 0; i < n; ++i) {
    const double want = yd.cpu_data()[i];
    const double got = yf.cpu_data()[i];
    // Outside float's range the float result is its overflow or underflow.
    if (std::fabs(want) > std::numeric_limits<float>::max()) {
      ASSERT_TRUE(std::isinf(got) && (got > 0) == (want > 0)) << "x = " << xd.cpu_data()[i] << ": " << got;
      continue;
    }
    if (std::isnan(want) || std::isinf(want)) {
      ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << "x = " << xd.cpu_data()[i] << ": " << got;
      continue;
    }
    ASSERT_NEAR(got, want, rel * std::fabs(want) + abs) << "forward, x = " << xd.cpu_data()[i];
  }
  cpu_set(n, 1.0f, yf.mutable_cpu_diff());
  cpu_set(n, 1.0, yd.mutable_cpu_diff());
  lf->Backward({&yf}, {true}, {&xf});
  ld->Backward({&yd}, {true}, {&xd});
  for (int i = 0; i < n; ++i) {
    const double want = xd.cpu_diff()[i];
    const double got = xf.cpu_diff()[i];
    if (!std::isfinite(want) || std::fabs(want) > std::numeric_limits<float>::max()) continue;
    ASSERT_NEAR(got, want, rel * std::fabs(want) + grad_abs) << "backward, x = " << xd.cpu_data()[i];
  }
}

// ---------------------------------------------------------------------------------------------------- AbsVal

TEST(AbsValLayer, HandWorked) {
  ExpectHandWorked(Param(R"(type: "AbsVal")"),
                   {{-2, -0.5, 0, 1.5, kNaN}, {2, 0.5, 0, 1.5, kNaN}, {-1, -2, 0, 4, 0}, {1, 2, 3, 4, 5}});
}

TEST(AbsValLayer, Gradient) { CheckGradient(Param(R"(type: "AbsVal")"), -2, 2, {0}); }

TEST(AbsValLayer, InPlace) { ExpectInPlaceBackwardRefused(Param(R"(type: "AbsVal")")); }

TEST(AbsValLayer, RecomputeHints) { ExpectHints(Param(R"(type: "AbsVal")"), true, false); }

// ------------------------------------------------------------------------------------------------------ BNLL

TEST(BNLLLayer, HandWorked) {
  // log(1 + e^x): ln 2 at 0, ln 4 at ln 3, ln(4/3) at -ln 3; 60 + e^-60 and e^-60 in the tails. The
  // gradient is sigmoid(x): 1/2, 3/4, 1/4, 1 - e^-60, e^-60 / (1 + e^-60).
  const double l3 = std::log(3.0), e60 = std::exp(-60.0);
  ExpectHandWorked(Param(R"(type: "BNLL")"),
                   {{0, l3, -l3, 60, -60, kInf, -kInf},
                    {std::log(2.0), std::log(4.0), std::log(4.0 / 3), 60, e60, kInf, 0},
                    {0.5, 0.75, 0.25, 1, e60, 1, 0}});
}

TEST(BNLLLayer, FloatMatchesDouble) {
  ExpectFloatMatchesDouble(Param(R"(type: "BNLL")"), 200001, [](int i) { return -100.0 + 200.0 * i / 200000; },
                           4e-7, 1e-37);
}

TEST(BNLLLayer, Gradient) { CheckGradient(Param(R"(type: "BNLL")"), -5, 5); }

TEST(BNLLLayer, InPlaceMatchesOutOfPlace) { ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "BNLL")"), {2, 3, 5}); }

TEST(BNLLLayer, RecomputeHints) { ExpectHints(Param(R"(type: "BNLL")"), false, true); }

// ------------------------------------------------------------------------------------------------------ Clip

TEST(ClipLayer, HandWorked) {
  // The gradient passes on the bounds (Caffe's closed interval); NaN stays NaN with gradient 0.
  ExpectHandWorked(Param(R"(type: "Clip" clip_param { min: -1 max: 2 })"),
                   {{-3, -1, 0.5, 2, 5, kNaN}, {-1, -1, 0.5, 2, 2, kNaN}, {0, 2, 3, 4, 0, 0}, {1, 2, 3, 4, 5, 6}});
  // min == max: a constant.
  ExpectHandWorked(Param(R"(type: "Clip" clip_param { min: 0.5 max: 0.5 })"),
                   {{0, 0.5, 1}, {0.5, 0.5, 0.5}, {0, 1, 0}});
}

TEST(ClipLayer, Gradient) {
  CheckGradient(Param(R"(type: "Clip" clip_param { min: -0.5 max: 0.75 })"), -1.5, 1.5, {-0.5, 0.75});
}

TEST(ClipLayer, InPlace) { ExpectInPlaceBackwardRefused(Param(R"(type: "Clip" clip_param { min: -1 max: 1 })")); }

TEST(ClipLayer, RecomputeHints) { ExpectHints(Param(R"(type: "Clip" clip_param { min: 0 max: 6 })"), true, false); }

TEST(ClipLayer, BadParametersRefused) {
  ExpectRefused(Param(R"(type: "Clip" clip_param { min: 2 max: 1 })"), "must not exceed");
  LayerParameter no_max;
  no_max.set_name("clip");
  no_max.set_type("Clip");
  no_max.mutable_clip_param()->set_min(0);  // clip_param's fields are required; only code can leave one out
  ExpectRefused(no_max, "clip_param { min");
  LayerParameter none;
  none.set_name("clip");
  none.set_type("Clip");
  ExpectRefused(none, "clip_param { min");
}

// ------------------------------------------------------------------------------------------------------- ELU

TEST(ELULayer, HandWorked) {
  const double l2 = std::log(2.0), l4 = std::log(4.0);
  // alpha 0.5: 0.5 (e^x - 1) below 0, slope 0.5 e^x there (0.5 at 0: Caffe's x <= 0 side).
  ExpectHandWorked(Param(R"(type: "ELU" elu_param { alpha: 0.5 })"),
                   {{-l2, 0, 1.5, -l4, -1e-5, kNaN},
                    {-0.25, 0, 1.5, -0.375, 0.5 * std::expm1(-1e-5), kNaN},
                    {0.25, 0.5, 1, 0.125, 0.5 * std::exp(-1e-5), kNaN}});
  // A negative alpha flips the negative side above 0; the gradient then comes from the bottom.
  ExpectHandWorked(Param(R"(type: "ELU" elu_param { alpha: -0.5 })"),
                   {{-l2, 0, 1.5, -l4}, {0.25, 0, 1.5, 0.375}, {-0.25, -0.5, 1, -0.125}});
  // The default alpha is 1.
  ExpectHandWorked(Param(R"(type: "ELU")"), {{-l2, 2}, {-0.5, 2}, {0.5, 1}});
}

TEST(ELULayer, FloatMatchesDouble) {
  // The gradient below 0 is y + alpha (Caffe's form, which lets backward read the top): as y nears -alpha it
  // keeps only an absolute precision, an ulp or two of alpha.
  ExpectFloatMatchesDouble(Param(R"(type: "ELU" elu_param { alpha: 1.5 })"), 200001,
                           [](int i) { return -30.0 + 40.0 * i / 200000; }, 4e-7, 1e-37, 3e-7);
  // Near 0, where e^x - 1 loses digits: expm1 keeps full relative precision.
  ExpectFloatMatchesDouble(Param(R"(type: "ELU")"), 20001, [](int i) { return -1e-3 * i / 20000; }, 4e-7, 1e-37);
}

TEST(ELULayer, Gradient) {
  for (const char* alpha : {"0.5", "1", "0", "-0.3"}) {
    CheckGradient(Param(std::string(R"(type: "ELU" elu_param { alpha: )") + alpha + " }"), -3, 3, {0});
  }
}

TEST(ELULayer, InPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "ELU" elu_param { alpha: 0.7 })"), {2, 3, 5});
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "ELU" elu_param { alpha: 0 })"), {2, 3, 5});
  ExpectInPlaceBackwardRefused(Param(R"(type: "ELU" elu_param { alpha: -0.5 })"));
}

TEST(ELULayer, RecomputeHints) {
  ExpectHints(Param(R"(type: "ELU")"), false, true);
  ExpectHints(Param(R"(type: "ELU" elu_param { alpha: -1 })"), true, false);
}

// ------------------------------------------------------------------------------------------------------- Exp

TEST(ExpLayer, HandWorked) {
  // 2^(1 + 3x); the gradient is 3 ln2 y.
  const double k = 3 * std::log(2.0), r = std::pow(2.0, 2.5);
  ExpectHandWorked(Param(R"(type: "Exp" exp_param { base: 2 scale: 3 shift: 1 })"),
                   {{0, 1, -1.0 / 3, 0.5}, {2, 16, 1, r}, {2 * k, 16 * k, k, r * k}});
  // The default base is e: y = e^x = dy/dx.
  const double e = std::exp(1.0);
  ExpectHandWorked(Param(R"(type: "Exp")"), {{0, 1, -2, -200}, {1, e, 1 / (e * e), 0}, {1, e, 1 / (e * e), 0}});
  // e^(0.5 - x): the shift with base e, and a negative scale.
  ExpectHandWorked(Param(R"(type: "Exp" exp_param { scale: -1 shift: 0.5 })"),
                   {{0.5, 0}, {1, std::exp(0.5)}, {-1, -std::exp(0.5)}});
}

TEST(ExpLayer, Gradient) {
  CheckGradient(Param(R"(type: "Exp" exp_param { base: 2 scale: 0.7 shift: 0.3 })"), -2, 2);
  CheckGradient(Param(R"(type: "Exp")"), -2, 2);
}

TEST(ExpLayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "Exp" exp_param { base: 3 scale: 0.5 shift: -1 })"), {2, 3, 5});
}

TEST(ExpLayer, RecomputeHints) { ExpectHints(Param(R"(type: "Exp")"), false, true); }

TEST(ExpLayer, BadParametersRefused) {
  for (const char* base : {"0", "-2", "-0.5", "inf", "nan"}) {
    ExpectRefused(Param(std::string(R"(type: "Exp" exp_param { base: )") + base + " }"), "exp_param.base");
  }
}

// ------------------------------------------------------------------------------------------------------- Log

TEST(LogLayer, HandWorked) {
  // log10(1 + 2x); the gradient is 2 / (ln10 (1 + 2x)). Non-positive arguments give -inf and NaN (Caffe).
  const double l10 = std::log(10.0);
  ExpectHandWorked(Param(R"(type: "Log" log_param { base: 10 scale: 2 shift: 1 })"),
                   {{0, 4.5, 49.5, -0.45, -0.5, -1},
                    {0, 1, 2, -1, -kInf, kNaN},
                    {2 / l10, 0.2 / l10, 0.02 / l10, 20 / l10, kInf, -2 / l10}},
                   2e-6);
  // The default base is e.
  const double e = std::exp(1.0);
  ExpectHandWorked(Param(R"(type: "Log")"), {{1, e, 0.5, kInf}, {0, 1, -std::log(2.0), kInf}, {1, 1 / e, 2, 0}});
}

TEST(LogLayer, FloatMatchesDouble) {
  // Subnormals to the largest floats, through 1 where the result crosses 0.
  ExpectFloatMatchesDouble(Param(R"(type: "Log")"), 400001,
                           [](int i) { return std::pow(2.0, -149.0 + 277.0 * i / 400000); }, 3e-7, 1e-38);
  ExpectFloatMatchesDouble(Param(R"(type: "Log" log_param { base: 2 })"), 100001,
                           [](int i) { return 0.5 + 1.5 * i / 100000; }, 3e-7, 1e-12);
}

TEST(LogLayer, Gradient) {
  CheckGradient(Param(R"(type: "Log" log_param { base: 10 scale: 2 shift: 3 })"), -1, 1);
  CheckGradient(Param(R"(type: "Log")"), 0.5, 3);
}

TEST(LogLayer, InPlace) { ExpectInPlaceBackwardRefused(Param(R"(type: "Log")"), 0.1, 3); }

TEST(LogLayer, RecomputeHints) { ExpectHints(Param(R"(type: "Log")"), true, false); }

TEST(LogLayer, BadParametersRefused) {
  for (const char* base : {"0", "-2", "-0.5", "nan"}) {
    ExpectRefused(Param(std::string(R"(type: "Log" log_param { base: )") + base + " }"), "log_param.base");
  }
  // Bases whose logarithm is 0 or infinite.
  ExpectRefused(Param(R"(type: "Log" log_param { base: 1 })"), "no usable logarithm");
  ExpectRefused(Param(R"(type: "Log" log_param { base: inf })"), "no usable logarithm");
}

// ----------------------------------------------------------------------------------------------------- Power

TEST(PowerLayer, HandWorked) {
  // (3x - 1)^2: gradient 6 (3x - 1).
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: 2 scale: 3 shift: -1 })"),
                   {{0, 1, 2, 0.5}, {1, 4, 25, 0.25}, {-6, 12, 30, 3}});
  // x^3: gradient 3 x^2, 0 at 0 (where Caffe's power y / x is 0/0).
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: 3 })"), {{-2, 0, 1.5}, {-8, 0, 3.375}, {12, 0, 6.75}});
  // (4x + 1)^0.5: gradient 2 / sqrt(4x + 1); a negative base gives NaN.
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: 0.5 scale: 4 shift: 1 })"),
                   {{0, 2, 6, -1}, {1, 3, 5, kNaN}, {2, 2.0 / 3, 0.4, kNaN}});
  // (x + 1)^-1.
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: -1 shift: 1 })"), {{0, 1, 3}, {1, 0.5, 0.25},
                                                                                 {-1, -0.25, -0.0625}});
  // power 1: 0.5 - 2x, gradient -2.
  ExpectHandWorked(Param(R"(type: "Power" power_param { scale: -2 shift: 0.5 })"),
                   {{0, 1, -3}, {0.5, -1.5, 6.5}, {-2, -4, -6}, {1, 2, 3}});
  // power 0: 1 everywhere; scale 0: shift^power everywhere; the gradient is 0.
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: 0 scale: 3 shift: 2 })"),
                   {{-1, 0, 7}, {1, 1, 1}, {0, 0, 0}});
  ExpectHandWorked(Param(R"(type: "Power" power_param { power: 3 scale: 0 shift: 2 })"),
                   {{-1, 0, kNaN}, {8, 8, 8}, {0, 0, 0}});
}

TEST(PowerLayer, Gradient) {
  CheckGradient(Param(R"(type: "Power" power_param { power: 2.5 scale: 0.8 shift: 2 })"), -1, 1);
  CheckGradient(Param(R"(type: "Power" power_param { power: 2 scale: -1 shift: 0.3 })"), -1, 1);
  CheckGradient(Param(R"(type: "Power" power_param { power: 3 scale: 1.5 })"), -1, 1);
  CheckGradient(Param(R"(type: "Power" power_param { power: -0.5 shift: 2 })"), -1, 1);
  CheckGradient(Param(R"(type: "Power" power_param { power: 1 scale: 3 shift: -1 })"), -1, 1);
  CheckGradient(Param(R"(type: "Power" power_param { power: 0 })"), -1, 1);
}

TEST(PowerLayer, InPlace) {
  // With a constant gradient the input is not needed: in place works.
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "Power" power_param { scale: 3 shift: -1 })"), {2, 3, 5});
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "Power" power_param { power: 2 scale: 0 shift: 3 })"), {2, 3, 5});
  ExpectInPlaceBackwardRefused(Param(R"(type: "Power" power_param { power: 2 })"));
  ExpectInPlaceBackwardRefused(Param(R"(type: "Power" power_param { power: 1.5 shift: 4 })"));
}

TEST(PowerLayer, RecomputeHints) {
  ExpectHints(Param(R"(type: "Power" power_param { power: 2 })"), true, false);
  ExpectHints(Param(R"(type: "Power" power_param { power: 1 scale: 2 })"), false, false);
  ExpectHints(Param(R"(type: "Power" power_param { power: 0 })"), false, false);
  ExpectHints(Param(R"(type: "Power" power_param { power: 2 scale: 0 })"), false, false);
}

TEST(PowerLayer, LargeBlobFloatMatchesDouble) {
  // Each branch (power 1, 2, general) on the multi-threaded path.
  for (const char* text : {R"(type: "Power" power_param { scale: 0.5 shift: 1 })",
                           R"(type: "Power" power_param { power: 2 scale: 0.5 shift: 1 })",
                           R"(type: "Power" power_param { power: 1.7 scale: 0.5 shift: 3 })"}) {
    ExpectFloatMatchesDouble(Param(text), 100001, [](int i) { return -4.0 + 8.0 * i / 100000; }, 1e-6, 1e-6);
  }
}

// ----------------------------------------------------------------------------------------------------- PReLU

TEST(PReLULayer, HandWorked) {
  // Shape (2, 3, 2), slopes 0.1, -0.2, 0.5; dy = 1..12.
  const double xv[] = {1, -2, -1, 3, -4, 0, -10, 0.5, 2, -0.5, 0, -2};
  const double yv[] = {1, -0.2, 0.2, 3, -2, 0, -1, 0.5, 2, 0.1, 0, -1};
  const double dxv[] = {1, 0.2, -0.6, 4, 2.5, 3, 0.7, 8, 9, -2, 5.5, 6};
  // The slopes' gradient: x dy summed over each channel's x <= 0.
  const double dslope[] = {-2 * 2 - 10 * 7, -1 * 3 - 0.5 * 10, -4 * 5 - 2 * 12};
  // Shared (the default slope 0.25): one slope, the sum over all.
  const double yshared[] = {1, -0.5, -0.25, 3, -1, 0, -2.5, 0.5, 2, -0.125, 0, -0.5};
  auto run = [&](auto zero, bool shared) {
    using T = decltype(zero);
    Blob<T> x({2, 3, 2}), y;
    for (int i = 0; i < 12; ++i) x.mutable_cpu_data()[i] = static_cast<T>(xv[i]);
    auto layer = Make<T>(Param(shared ? R"(type: "PReLU" prelu_param { channel_shared: true })" : R"(type: "PReLU")"));
    layer->SetUp({&x}, {&y});
    Blob<T>& slope = *layer->blobs()[0];
    ASSERT_EQ(slope.shape(), shared ? std::vector<int>{} : std::vector<int>{3});
    for (int c = 0; c < slope.count(); ++c) EXPECT_EQ(slope.cpu_data()[c], T(0.25)) << "the default filler";
    if (!shared) {
      const T a[] = {T(0.1), T(-0.2), T(0.5)};
      std::copy(a, a + 3, slope.mutable_cpu_data());
    }
    cpu_set(slope.count(), T(0), slope.mutable_cpu_diff());
    layer->Forward({&x}, {&y});
    for (int i = 0; i < 12; ++i) {
      y.mutable_cpu_diff()[i] = T(i + 1);
      EXPECT_NEAR(y.cpu_data()[i], shared ? yshared[i] : yv[i], 1e-6) << i;
    }
    layer->Backward({&y}, {true}, {&x});
    for (int i = 0; i < 12; ++i) {
      const double want = shared ? (xv[i] > 0 ? i + 1 : 0.25 * (i + 1)) : dxv[i];
      EXPECT_NEAR(x.cpu_diff()[i], want, 1e-5) << i;
    }
    if (shared) {
      EXPECT_NEAR(slope.cpu_diff()[0], dslope[0] + dslope[1] + dslope[2], 1e-5);
    } else {
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(slope.cpu_diff()[c], dslope[c], 1e-5) << c;
    }
    // A parameter's gradient accumulates.
    layer->Backward({&y}, {false}, {&x});
    EXPECT_NEAR(slope.cpu_diff()[0], 2 * (shared ? dslope[0] + dslope[1] + dslope[2] : dslope[0]), 1e-5);
  };
  for (bool shared : {false, true}) {
    run(0.0, shared);
    run(0.0f, shared);
  }
}

TEST(PReLULayer, Gradient) {
  for (const char* text : {R"(type: "PReLU" prelu_param { filler { type: "uniform" min: -0.5 max: 0.5 } })",
                           R"(type: "PReLU" prelu_param { channel_shared: true filler { type: "constant" value: -0.3 } })"}) {
    CheckGradient(Param(text), -1, 1, {0});               // (outer, channels, inner) with inner > 1
    CheckGradient(Param(text), -1, 1, {0}, {4, 5});       // inner 1
    CheckGradient(Param(text), -1, 1, {0}, {2, 3, 1, 1});  // inner 1, 4 axes
  }
}

// The layer on a large blob (threads, every layout) against a plain loop, in float.
TEST(PReLULayer, LargeBlobsMatchAPlainLoop) {
  for (const std::vector<int>& shape : {std::vector<int>{4, 16, 60, 61}, std::vector<int>{3000, 70}}) {
    for (bool shared : {false, true}) {
      Blob<float> x(shape), y;
      FillUniform(&x, -1.0f, 1.0f, 3);
      auto layer = Make<float>(Param(shared ? R"(type: "PReLU" prelu_param { channel_shared: true
                                                 filler { type: "uniform" min: -1 max: 1 } })"
                                            : R"(type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })"));
      layer->SetUp({&x}, {&y});
      layer->Forward({&x}, {&y});
      rng_uniform<float>(y.count(), -1.0f, 1.0f, y.mutable_cpu_diff());
      Blob<float>& slope = *layer->blobs()[0];
      cpu_set(slope.count(), 0.0f, slope.mutable_cpu_diff());
      layer->Backward({&y}, {true}, {&x});
      const int channels = shape[1], inner = x.count(2);
      std::vector<double> dslope(slope.count(), 0.0), magnitude(slope.count(), 0.0);
      for (int k = 0; k < x.count(); ++k) {
        const int c = shared ? 0 : (k / inner) % channels;
        const float v = x.cpu_data()[k], a = slope.cpu_data()[c], g = y.cpu_diff()[k];
        ASSERT_EQ(y.cpu_data()[k], v > 0 ? v : a * v) << k;
        ASSERT_EQ(x.cpu_diff()[k], g * (v > 0 ? 1.0f : a)) << k;
        if (v <= 0) {
          dslope[c] += double(v) * g;
          magnitude[c] += std::fabs(double(v) * g);
        }
      }
      // Summed in float within runs: a few float roundings of the terms' total size.
      for (int c = 0; c < slope.count(); ++c) {
        EXPECT_NEAR(slope.cpu_diff()[c], dslope[c], 1e-6 * magnitude[c] + 1e-6) << c;
      }
    }
  }
}

TEST(PReLULayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "PReLU")"), {2, 3, 4, 2});
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "PReLU" prelu_param { channel_shared: true })"), {2, 3, 4, 2});
  // Random slopes (the same in both layers), and the slopes' gradient: in place it reads the kept copy of the
  // input.
  for (const char* text : {R"(type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })",
                           R"(type: "PReLU" prelu_param { channel_shared: true
                              filler { type: "uniform" min: -1 max: 1 } })"}) {
    SCOPED_TRACE(text);
    Blob<double> x({2, 3, 4}), y, x2({2, 3, 4});
    FillUniform(&x, -1.0, 1.0, 8);
    x2.CopyFrom(x);
    auto plain = Make<double>(Param(text));
    auto inplace = Make<double>(Param(text));
    Strata::set_random_seed(1);
    plain->SetUp({&x}, {&y});
    Strata::set_random_seed(1);
    inplace->SetUp({&x2}, {&x2});
    plain->Forward({&x}, {&y});
    inplace->Forward({&x2}, {&x2});
    EXPECT_EQ(inplace->SavedActivations()[0]->count(), x.count()) << "the kept input";
    EXPECT_EQ(plain->SavedActivations()[0]->count(), 0) << "out of place nothing is kept";
    for (int i = 0; i < y.count(); ++i) ASSERT_EQ(x2.cpu_data()[i], y.cpu_data()[i]) << "forward, element " << i;
    Blob<double> dy({2, 3, 4});
    FillUniform(&dy, -1.0, 1.0, 9);
    cpu_copy(dy.count(), dy.cpu_data(), y.mutable_cpu_diff());
    cpu_copy(dy.count(), dy.cpu_data(), x2.mutable_cpu_diff());
    plain->Backward({&y}, {true}, {&x});
    inplace->Backward({&x2}, {true}, {&x2});
    for (int i = 0; i < x.count(); ++i) ASSERT_EQ(x2.cpu_diff()[i], x.cpu_diff()[i]) << "backward, element " << i;
    for (int c = 0; c < plain->blobs()[0]->count(); ++c) {
      EXPECT_EQ(inplace->blobs()[0]->cpu_diff()[c], plain->blobs()[0]->cpu_diff()[c]) << c;
    }
  }
}

TEST(PReLULayer, RecomputeHints) { ExpectHints(Param(R"(type: "PReLU")"), true, false); }

TEST(PReLULayer, BadConfigurationsRefused) {
  ExpectRefused(Param(R"(type: "PReLU")"), "at least 2 axes", {5});
  // Slopes that came with the layer must fit: 3 channels, or 1 value when shared.
  LayerParameter p = Param(R"(type: "PReLU")");
  p.add_blobs()->mutable_shape()->add_dim(4);
  p.mutable_blobs(0)->mutable_data()->Resize(4, 0.25f);
  ExpectRefused(p, "the slope blob has 4 value(s) but the bottom has 3 channels");
  p.mutable_prelu_param()->set_channel_shared(true);
  ExpectRefused(p, "channel_shared needs 1");
  // A bottom reshaped to other channels.
  Blob<float> x({2, 3, 4}), y;
  auto layer = Make<float>(Param(R"(type: "PReLU")"));
  layer->SetUp({&x}, {&y});
  x.Reshape({2, 5, 4});
  EXPECT_THROW(layer->Forward({&x}, {&y}), Error);
}

// ----------------------------------------------------------------------------------------------------- Swish

TEST(SwishLayer, HandWorked) {
  // x sigmoid(x): sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4; gradient s + x s (1 - s).
  const double l3 = std::log(3.0);
  ExpectHandWorked(Param(R"(type: "Swish")"),
                   {{0, l3, -l3}, {0, 0.75 * l3, -0.25 * l3}, {0.5, 0.75 + 0.1875 * l3, 0.25 - 0.1875 * l3}});
  // beta 2 at x = ln3 / 2: s = sigmoid(ln 3) = 3/4; gradient s + beta x s (1 - s).
  ExpectHandWorked(Param(R"(type: "Swish" swish_param { beta: 2 })"),
                   {{l3 / 2, -l3 / 2}, {0.375 * l3, -0.125 * l3}, {0.75 + 0.1875 * l3, 0.25 - 0.1875 * l3}});
}

TEST(SwishLayer, Gradient) {
  for (const char* beta : {"1", "0.7", "-1.5", "0"}) {
    CheckGradient(Param(std::string(R"(type: "Swish" swish_param { beta: )") + beta + " }"), -4, 4);
  }
}

TEST(SwishLayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "Swish" swish_param { beta: 1.3 })"), {2, 3, 5});
}

TEST(SwishLayer, RecomputeHints) { ExpectHints(Param(R"(type: "Swish")"), true, false); }

TEST(SwishLayer, LargeBlobFloatMatchesDouble) {
  // Rounding beta x to float moves sigmoid(beta x) in the far negative tail by up to |beta x| / 2 ulp (Caffe's
  // too): the bound allows for |beta x| <= 24. The gradient crosses 0 near x = -1.28 / beta, where only an
  // absolute bound (a few ulp of its terms) holds.
  ExpectFloatMatchesDouble(Param(R"(type: "Swish" swish_param { beta: 0.8 })"), 200001,
                           [](int i) { return -30.0 + 60.0 * i / 200000; }, 3e-6, 1e-30, 1e-7);
}

// ------------------------------------------------------------------------------------------------- Threshold

TEST(ThresholdLayer, HandWorked) {
  // 1 strictly above the threshold; the gradient is 0 (see the header).
  ExpectHandWorked(Param(R"(type: "Threshold" threshold_param { threshold: 0.5 })"),
                   {{0.4, 0.5, 0.6, -1, kNaN, kInf}, {0, 0, 1, 0, 0, 1}, {0, 0, 0, 0, 0, 0}, {1, 2, 3, 4, 5, 6}});
  ExpectHandWorked(Param(R"(type: "Threshold")"), {{-1e-30, 0, 1e-30}, {0, 0, 1}, {0, 0, 0}});
}

TEST(ThresholdLayer, Gradient) {
  // Finite differences of a step are 0 away from the step.
  CheckGradient(Param(R"(type: "Threshold" threshold_param { threshold: 0.2 })"), -1, 1, {0.2});
}

TEST(ThresholdLayer, InPlaceMatchesOutOfPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "Threshold" threshold_param { threshold: -0.5 })"), {2, 3, 5});
}

TEST(ThresholdLayer, NoGradientAskedLeavesTheDiff) {
  Blob<float> x({3}), y;
  cpu_set(3, 7.0f, x.mutable_cpu_diff());
  auto layer = Make<float>(Param(R"(type: "Threshold")"));
  layer->SetUp({&x}, {&y});
  layer->Forward({&x}, {&y});
  layer->Backward({&y}, {false}, {&x});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(x.cpu_diff()[i], 7.0f);
}

TEST(ThresholdLayer, RecomputeHints) { ExpectHints(Param(R"(type: "Threshold")"), false, false); }

// ------------------------------------------------------------------------------------------------ In a Net

// conv, then `layers` in a chain (each its own top, or all in place on the conv's top), then an InnerProduct and
// a loss, and `extra` layers (in place) before the InnerProduct.
// A layer whose backward reads its top (BNLL, ELU with alpha >= 0, Exp) may only end an in-place chain: a later
// in-place layer would overwrite that top before its backward runs (as with ReLU or Sigmoid, in Caffe too).
std::string ChainNet(bool in_place, const std::vector<std::string>& layers, const std::string& extra = "") {
  std::string text = R"(
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 4 dim: 3 dim: 2 dim: 2 } shape { dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "h0"
        convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.8 } } })";
  int k = 0;
  for (const std::string& l : layers) {
    const std::string bottom = in_place ? "h0" : "h" + std::to_string(k);
    const std::string top = in_place ? "h0" : "h" + std::to_string(k + 1);
    text += "\nlayer { name: \"n" + std::to_string(k) + "\" bottom: \"" + bottom + "\" top: \"" + top + "\" " + l +
            " }";
    ++k;
  }
  const std::string last = in_place ? "h0" : "h" + std::to_string(k);
  text += extra + R"(
layer { name: "ip" type: "InnerProduct" bottom: ")" + last + R"(" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" })";
  return text;
}

NetParameter NetParam(const std::string& text) {
  NetParameter p;
  ReadProtoFromTextString(text, &p, "test.prototxt");
  p.mutable_state()->set_phase(TRAIN);
  p.set_force_backward(true);
  return p;
}

// Runs forward and backward and returns the input's gradient, then every parameter's.
std::vector<std::vector<double>> Gradients(Net<double>& net) {
  Strata::set_random_seed(17);
  Blob<double>* x = net.blob_by_name("x").get();
  rng_uniform<double>(x->count(), -1, 1, x->mutable_cpu_data());
  Blob<double>* label = net.blob_by_name("label").get();
  for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = i % 3;
  net.ForwardBackward();
  std::vector<std::vector<double>> g{{x->cpu_diff(), x->cpu_diff() + x->count()}};
  for (const auto& p : net.params()) g.emplace_back(p->cpu_diff(), p->cpu_diff() + p->count());
  return g;
}

TEST(NeuronLayersInANet, InPlaceChainsMatchOutOfPlace) {
  const std::string prelu = R"(type: "PReLU" prelu_param { filler { type: "uniform" min: -0.5 max: 0.5 } })";
  const std::string shared = R"(type: "PReLU" prelu_param { channel_shared: true })";
  const std::string swish = R"(type: "Swish" swish_param { beta: 1.2 })";
  const std::string power = R"(type: "Power" power_param { scale: 2 shift: -1 })";
  const std::vector<std::vector<std::string>> chains = {
      {prelu, swish, shared, power, R"(type: "ELU" elu_param { alpha: 0.8 })"},
      {swish, power, R"(type: "BNLL")"},
      {shared, R"(type: "Exp" exp_param { scale: -0.3 })"},
      {prelu, R"(type: "Threshold" threshold_param { threshold: 0.1 })"},
  };
  for (const auto& chain : chains) {
    SCOPED_TRACE(ChainNet(true, chain));
    Strata::set_random_seed(3);
    Net<double> plain(NetParam(ChainNet(false, chain)));
    Strata::set_random_seed(3);
    Net<double> inplace(NetParam(ChainNet(true, chain)));
    const auto a = Gradients(plain), b = Gradients(inplace);
    ASSERT_EQ(a.size(), b.size());
    double norm = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].size(), b[k].size());
      for (size_t i = 0; i < a[k].size(); ++i) {
        EXPECT_EQ(b[k][i], a[k][i]) << "gradient " << k << " element " << i;
        norm += std::fabs(a[k][i]);
      }
    }
    EXPECT_GT(norm, 0);
  }
}

// Refused when the net is built (Net's in-place rule, Layer::BackwardWorksInPlace), before any iteration.
TEST(NeuronLayersInANet, InPlaceClipTrainsNotSilently) {
  try {
    Net<double> net(NetParam(ChainNet(true, {R"(type: "PReLU")"}, R"(
layer { name: "relu6" type: "Clip" bottom: "h0" top: "h0" clip_param { min: 0 max: 6 } })")));
    ADD_FAILURE() << "an in-place Clip that runs backward was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'relu6' (Clip) runs in place (top 'h0' is its bottom)"),
              std::string::npos) << e.what();
  }
}

TEST(NeuronLayersInANet, ThresholdPassesNoGradient) {
  // Everything below the Threshold learns nothing through it; the layer above it still does.
  Net<double> net(NetParam(ChainNet(true, {R"(type: "Swish")"}, R"(
layer { name: "step" type: "Threshold" bottom: "h0" top: "h0" threshold_param { threshold: 0.5 } })")));
  const auto g = Gradients(net);
  double below = 0, above = 0;
  for (size_t k = 0; k + 2 < g.size(); ++k)
    for (double v : g[k]) below += std::fabs(v);
  for (size_t k = g.size() - 2; k < g.size(); ++k)
    for (double v : g[k]) above += std::fabs(v);
  EXPECT_EQ(below, 0);
  EXPECT_GT(above, 0);
}

}  // namespace
}  // namespace strata
