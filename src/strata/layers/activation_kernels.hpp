// Element-wise math shared by the activation, softmax and loss layers (private to src/strata/layers).
//
// libm's expf/tanhf are scalar calls that GCC does not vectorise without -ffast-math, and they are nearly the
// whole cost of Sigmoid, TanH and Softmax. The float kernels below are written with plain arithmetic, selects
// and bit casts only, so a loop that calls them vectorises (8 lanes with AVX2, 4 with SSE2). Their error is a few ulp (the
// layer tests compare them with the double versions over a sweep). double, which the gradient checks run in,
// keeps libm.
#pragma once

#include <cblas.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "strata/cpu_dispatch.hpp"
#include "strata/parallel.hpp"

namespace strata {
namespace act {

// Whether a loop over `work` elements should run on several threads (the policy lives in strata/parallel.hpp:
// one OpenMP pool, OpenBLAS on the calling thread, so a parallel loop between two GEMMs costs no spinning).
inline bool use_threads(long long work) { return parallel_worthwhile(work); }

// a * b + c, rounded once where the whole build has FMA; in the x86-64-v3 copy of a STRATA_HOT_KERNEL the compiler
// fuses the plain form itself.
inline float mul_add(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c ? a : b as a blend of the bits. GCC keeps a float `?:` as a branch where one side is a constant it can
// propagate (it duplicates the rest of the computation for that side), and a loop with a branch does not
// vectorise; the blend has no branch to duplicate.
inline float blend(bool c, float a, float b) {
  const uint32_t mask = c ? ~0u : 0u;
  return float_of((bits_of(a) & mask) | (bits_of(b) & ~mask));
}

// e^x for float. x = n ln2 + r with |r| <= ln2/2; e^r by its Taylor series to degree 7 (truncation < 6e-9
// relative); 2^n built in the exponent bits, in two factors so that n may run from -150 (results round to 0)
// to 129 (results overflow to inf) without leaving the normal exponent range. NaN propagates.
inline float exp(float x) {
  x = blend(x < -104.0f, -104.0f, x);
  x = blend(x > 89.0f, 89.0f, x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it leaves round(v) in the low mantissa bits
  const float t = mul_add(x, 1.44269504088896341f, kRound);
  const float n = t - kRound;
  const int32_t ni = static_cast<int32_t>(bits_of(t) - bits_of(kRound));
  // ln2 split so that n * kLn2Hi is exact.
  float r = mul_add(n, -0.693359375f, x);
  r = mul_add(n, 2.12194440e-4f, r);
  float p = 1.0f / 5040;
  p = mul_add(p, r, 1.0f / 720);
  p = mul_add(p, r, 1.0f / 120);
  p = mul_add(p, r, 1.0f / 24);
  p = mul_add(p, r, 1.0f / 6);
  p = mul_add(p, r, 0.5f);
  p = mul_add(p, r, 1.0f);
  p = mul_add(p, r, 1.0f);
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  const float s1 = float_of(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = float_of(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}
inline double exp(double x) { return std::exp(x); }

// 1 / (1 + e^-x): no cancellation anywhere, so it keeps full relative precision in both tails.
template <typename Dtype>
inline Dtype sigmoid(Dtype x) {
  return Dtype(1) / (Dtype(1) + act::exp(-x));
}

// tanh for float: an odd Taylor polynomial (to x^13, error < 2e-9) for |x| < 0.4, where 1 - 2/(1 + e^2|x|)
// would lose digits to cancellation; that form (sign restored) elsewhere. e^2|x| = inf gives exactly 1.
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float big = std::copysign(1.0f - 2.0f / (1.0f + act::exp(2.0f * a)), x);
  const float x2 = x * x;
  float p = 21844.0f / 6081075;
  p = mul_add(p, x2, -1382.0f / 155925);
  p = mul_add(p, x2, 62.0f / 2835);
  p = mul_add(p, x2, -17.0f / 315);
  p = mul_add(p, x2, 2.0f / 15);
  p = mul_add(p, x2, -1.0f / 3);
  const float small = std::copysign(mul_add(x * x2, p, x), x);
  // blend rather than `?:`, which GCC keeps as a branch (so no vectorisation) since it may not evaluate the
  // division of the other side unconditionally.
  return blend(a < 0.4f, small, big);
}
inline double tanh(double x) { return std::tanh(x); }

// y[i] = f(x[i]), on several threads when n is large (the `if` gates the threads only: on one thread the loop
// is still vectorised). y may be x (each i reads before it writes).
template <typename Dtype, typename F>
STRATA_HOT_KERNEL inline void map(int n, const Dtype* x, Dtype* y, F f) {
#pragma omp parallel for simd schedule(static) if (parallel : use_threads(n))
  for (int i = 0; i < n; ++i) y[i] = f(x[i]);
}

// y[i] = f(a[i], b[i]); y may be a or b.
template <typename Dtype, typename F>
STRATA_HOT_KERNEL inline void map(int n, const Dtype* a, const Dtype* b, Dtype* y, F f) {
#pragma omp parallel for simd schedule(static) if (parallel : use_threads(n))
  for (int i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
}

// A label stored as Dtype (truncated to int, as Caffe does) as a class index in [0, classes), or one of:
constexpr int kIgnoredLabel = -1;  // the layer's ignore_label
constexpr int kBadLabel = -2;      // anything else (out of range, NaN, beyond int)
template <typename Dtype>
inline int class_of(Dtype v, int classes, bool has_ignore, int ignore) {
  if (!(v > Dtype(INT_MIN) && v < Dtype(INT_MAX))) return kBadLabel;
  const int l = static_cast<int>(v);
  if (has_ignore && l == ignore) return kIgnoredLabel;
  return (l >= 0 && l < classes) ? l : kBadLabel;
}

}  // namespace act
}  // namespace strata
