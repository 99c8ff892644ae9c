// The LSTM cell step, one element at a time: shared by LSTMUnit and LSTM, by their CPU loops and their CUDA
// kernels (private to src/strata/layers).
//
// Caffe's LSTMUnit, for stream n and hidden unit d, with the gate pre-activations x laid out [i | f | o | g]
// (4 blocks of H values per stream):
//   i = sigmoid(x_i), f = cont_n * sigmoid(x_f) (exactly 0 when cont_n == 0), o = sigmoid(x_o), g = tanh(x_g)
//   c = f * c_prev + i * g,   h = o * tanh(c)
// Backward keeps Caffe's formulas exactly, including d x_f = dc_total * c_prev * f * (1 - f) with the
// cont-scaled f: the true derivative for the usual cont in {0, 1}, Caffe's quirk otherwise.
#pragma once

#include <cmath>

#include "strata/common.hpp"  // STRATA_HOST_DEVICE

namespace strata {
namespace lstm {

STRATA_HOST_DEVICE inline float exp_of(float x) { return expf(x); }
STRATA_HOST_DEVICE inline double exp_of(double x) { return exp(x); }
STRATA_HOST_DEVICE inline float tanh_of(float x) { return tanhf(x); }
STRATA_HOST_DEVICE inline double tanh_of(double x) { return tanh(x); }

template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype sigmoid(Dtype x) {
  return Dtype(1) / (Dtype(1) + exp_of(-x));
}

// The activated gates of element (n, d).
template <typename Dtype>
struct Gates {
  Dtype i, f, o, g;
};

template <typename Dtype>
STRATA_HOST_DEVICE inline Gates<Dtype> activate(const Dtype* x_n, int H, int d, Dtype cont) {
  Gates<Dtype> a;
  a.i = sigmoid(x_n[d]);
  a.f = cont == Dtype(0) ? Dtype(0) : cont * sigmoid(x_n[H + d]);
  a.o = sigmoid(x_n[2 * H + d]);
  a.g = tanh_of(x_n[3 * H + d]);
  return a;
}

// Element k = n * H + d of the N x H outputs. x: N x 4H pre-activations, c_prev, c, h: N x H, cont: N.
template <typename Dtype>
STRATA_HOST_DEVICE inline void CellForward(long long k, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont,
                                           Dtype* c, Dtype* h) {
  const long long n = k / H;
  const int d = static_cast<int>(k - n * H);
  const Gates<Dtype> a = activate(x + n * 4 * H, H, d, cont[n]);
  const Dtype ck = a.f * c_prev[k] + a.i * a.g;
  c[k] = ck;
  h[k] = a.o * tanh_of(ck);
}

// The gradient of element k: dc and dh are the gradients reaching c and h; writes the four gate pre-activation
// gradients into dx (N x 4H) and dc_prev (either may be null: not wanted). dc_prev may be dc itself (each
// element reads its dc before writing its dc_prev).
template <typename Dtype>
STRATA_HOST_DEVICE inline void CellBackward(long long k, int H, const Dtype* x, const Dtype* c_prev, const Dtype* cont,
                                            const Dtype* c, const Dtype* dc, const Dtype* dh, Dtype* dx,
                                            Dtype* dc_prev) {
  const long long n = k / H;
  const int d = static_cast<int>(k - n * H);
  const Gates<Dtype> a = activate(x + n * 4 * H, H, d, cont[n]);
  const Dtype tanh_c = tanh_of(c[k]);
  const Dtype dhk = dh[k];
  // Everything that reaches c: directly, and through h = o * tanh(c).
  const Dtype dc_total = dc[k] + dhk * a.o * (Dtype(1) - tanh_c * tanh_c);
  const Dtype cp = c_prev[k];
  if (dc_prev) dc_prev[k] = dc_total * a.f;
  if (dx) {
    Dtype* dx_n = dx + n * 4 * H;
    dx_n[d] = dc_total * a.g * a.i * (Dtype(1) - a.i);
    dx_n[H + d] = dc_total * cp * a.f * (Dtype(1) - a.f);
    dx_n[2 * H + d] = dhk * tanh_c * a.o * (Dtype(1) - a.o);
    dx_n[3 * H + d] = dc_total * a.i * (Dtype(1) - a.g * a.g);
  }
}

}  // namespace lstm
}  // namespace strata
