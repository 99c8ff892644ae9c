// Element-wise math for the Caffe neuron layers beyond ReLU/Sigmoid/TanH (AbsVal, BNLL, ELU, Log, ...; private
// to src/strata/layers).
//
// As in activation_kernels.hpp, the float functions are plain arithmetic, selects and bit casts, so a loop that
// calls them (act::map) vectorises; libm's logf/log1pf/expm1f would keep it scalar. Their error is a few ulp
// (tests/test_neuron_layers_catalogue.cpp sweeps them against libm in double). double keeps libm.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "activation_kernels.hpp"

namespace strata {
namespace neuron {

// c ? a : b without a branch for float (see act::blend); double keeps the plain select.
inline float select(bool c, float a, float b) { return act::blend(c, a, b); }
inline double select(bool c, double a, double b) { return c ? a : b; }

// ReLU as ReLULayer computes it, for the layers that absorb one (BatchNorm, Eltwise): max(v, 0) with slope 0, v or
// slope * v otherwise; NaN passes in both. Its gradient factor (v > 0) + slope (v <= 0) at v, or at its output for
// slope >= 0 (the same sign), without branches so that the loops vectorise: NaN gives 0.
template <typename Dtype>
inline Dtype relu(Dtype v) {
  return v < Dtype(0) ? Dtype(0) : v;
}
template <typename Dtype>
inline Dtype leaky_relu(Dtype v, Dtype slope) {
  return v > Dtype(0) ? v : slope * v;
}
template <typename Dtype>
inline Dtype relu_gradient_factor(Dtype v, Dtype slope) {
  return select(v > Dtype(0), Dtype(1), select(v <= Dtype(0), slope, Dtype(0)));
}

// Natural log for float. x = m 2^e with m in [sqrt(1/2), sqrt(2)) (subnormal x scaled by 2^23 first), and
// log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its odd series to s^9 (truncation < 3e-9
// relative); e ln2 is added in two parts so that e * kLn2Hi is exact. 0 gives -inf, inf gives inf, negative x
// and NaN give NaN, as libm does.
inline float log(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const bool subnormal = x < 1.17549435e-38f;  // FLT_MIN; 0 and negatives too (overridden below)
  const uint32_t u = act::bits_of(act::blend(subnormal, x * 8388608.0f, x));
  float m = act::float_of((u & 0x007fffffu) | 0x3f800000u);  // in [1, 2)
  const bool high = m > 1.41421356f;
  m = act::blend(high, 0.5f * m, m);
  const int32_t e = static_cast<int32_t>(u >> 23) - 127 + static_cast<int32_t>(high);
  const float ef = static_cast<float>(e) - act::blend(subnormal, 23.0f, 0.0f);
  const float s = (m - 1.0f) / (m + 1.0f);  // m - 1 is exact
  const float s2 = s * s;
  float p = 2.0f / 9;
  p = act::mul_add(p, s2, 2.0f / 7);
  p = act::mul_add(p, s2, 2.0f / 5);
  p = act::mul_add(p, s2, 2.0f / 3);
  const float log_m = act::mul_add(s * s2, p, 2.0f * s);
  float r = act::mul_add(ef, -2.12194440e-4f, log_m);  // ln2 = 0.693359375 - 2.12194440e-4
  r = act::mul_add(ef, 0.693359375f, r);
  r = act::blend(x == kInf, kInf, r);
  r = act::blend(x == 0.0f, -kInf, r);
  return act::blend(x >= 0.0f, r, std::numeric_limits<float>::quiet_NaN());
}
inline double log(double x) { return std::log(x); }

// log(1 + t) for float: log(u) t / (u - 1) with u = 1 + t corrects the rounding of u (exact to a few ulp where
// 1 + t rounds), and t itself where u rounds to 1.
inline float log1p(float t) {
  const float u = 1.0f + t;
  const float r = neuron::log(u) * (t / (u - 1.0f));
  return act::blend(u == 1.0f || t == std::numeric_limits<float>::infinity(), t, r);
}
inline double log1p(double t) { return std::log1p(t); }

// e^x - 1 for float: its Taylor series to x^9 where |x| < 0.5 (truncation < 6e-10 relative), where e^x - 1
// would lose digits to cancellation; e^x - 1 elsewhere.
inline float expm1(float x) {
  float p = 1.0f / 362880;
  p = act::mul_add(p, x, 1.0f / 40320);
  p = act::mul_add(p, x, 1.0f / 5040);
  p = act::mul_add(p, x, 1.0f / 720);
  p = act::mul_add(p, x, 1.0f / 120);
  p = act::mul_add(p, x, 1.0f / 24);
  p = act::mul_add(p, x, 1.0f / 6);
  p = act::mul_add(p, x, 0.5f);
  const float small = act::mul_add(x * x, p, x);
  return act::blend(std::fabs(x) < 0.5f, small, act::exp(x) - 1.0f);
}
inline double expm1(double x) { return std::expm1(x); }

}  // namespace neuron
}  // namespace strata
