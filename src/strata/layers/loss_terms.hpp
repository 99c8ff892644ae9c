// The per-position formulas of the Caffe loss layers (strata/layers/loss_layer.hpp), shared by their CPU code and
// their CUDA kernels so that both compute the same thing, and the CPU's sum over positions (the GPU's is in
// loss_kernels.cuh), with an element-wise loop for their backward. Private to src/strata/layers.
//
// The loss terms are computed and summed in double whatever the blobs hold, on both sides; the gradients in the
// blobs' type.
#pragma once

#include <math.h>

#include <algorithm>
#include <climits>

#include "strata/common.hpp"  // STRATA_HOST_DEVICE

#ifndef __CUDACC__
#include "strata/parallel.hpp"  // for the CPU's sum_terms and for_each
#endif

namespace strata {
namespace loss {

// Caffe's kLOG_THRESHOLD (a float): probabilities are clamped up to it before their log.
constexpr float kLogThreshold = 1e-20f;

// A label stored as a blob value, truncated to int as Caffe does: its class index in [0, classes), or
constexpr int kIgnored = -1;  // the layer's ignore_label
constexpr int kBad = -2;      // anything else (out of range, NaN, beyond int)
template <typename Dtype>
STRATA_HOST_DEVICE inline int label_class(Dtype v, int classes, bool has_ignore, int ignore) {
  if (!(v > Dtype(INT_MIN) && v < Dtype(INT_MAX))) return kBad;
  const int l = static_cast<int>(v);
  if (has_ignore && l == ignore) return kIgnored;
  return (l >= 0 && l < classes) ? l : kBad;
}

// Whether a target (any value, not only a class) is the ignore_label once truncated to int.
template <typename Dtype>
STRATA_HOST_DEVICE inline bool is_ignored(Dtype v, bool has_ignore, int ignore) {
  return has_ignore && v > Dtype(INT_MIN) && v < Dtype(INT_MAX) && static_cast<int>(v) == ignore;
}

// One position's share of a loss: counted (adds `value`, and 1 to the valid count), skipped (an ignored label), or
// a bad label (the layer reports the first one).
struct Term {
  double value;
  int status;
};
constexpr int kSkipped = 0, kCounted = 1, kBadLabel = 2;
STRATA_HOST_DEVICE inline Term counted(double value) { return Term{value, kCounted}; }
STRATA_HOST_DEVICE inline Term skipped() { return Term{0, kSkipped}; }
STRATA_HOST_DEVICE inline Term bad_label() { return Term{0, kBadLabel}; }

// SigmoidCrossEntropyLoss: -(t log s + (1 - t) log(1 - s)) with s = sigmoid(x), written as
// max(x, 0) - x t + log(1 + e^-|x|), which neither overflows nor cancels for large |x| (Caffe's stable form).
STRATA_HOST_DEVICE inline double sigmoid_cross_entropy(double x, double t) {
  return fmax(x, 0.0) - x * t + log1p(exp(-fabs(x)));
}

// ContrastiveLoss: a pair is similar when its label, truncated to int, is not 0 (Caffe's test).
template <typename Dtype>
STRATA_HOST_DEVICE inline bool similar_pair(Dtype y) {
  return y >= Dtype(1) || y <= Dtype(-1);
}

// ContrastiveLoss, one pair at squared distance d2 (the loss is the sum of these over 2N):
// similar d2; dissimilar max(margin - d, 0)^2, or max(margin - d2, 0) in the legacy version.
STRATA_HOST_DEVICE inline double contrastive_term(double d2, bool similar, double margin, bool legacy) {
  if (similar) return d2;
  if (legacy) return fmax(margin - d2, 0.0);
  const double m = fmax(margin - sqrt(d2), 0.0);
  return m * m;
}

// ContrastiveLoss's gradient with respect to a, for one pair, is this factor times (a - b) times the loss weight
// over N (and the opposite for b). Caffe's: 1 for a similar pair; for a dissimilar pair inside the margin -1
// (legacy) or -(margin - d) / (d + 1e-4), where the 1e-4 keeps a pair at distance 0 finite; 0 outside the margin.
STRATA_HOST_DEVICE inline double contrastive_factor(double d2, bool similar, double margin, bool legacy) {
  if (similar) return 1;
  if (legacy) return margin - d2 > 0 ? -1.0 : 0.0;
  const double d = sqrt(d2);
  const double m = margin - d;
  return m > 0 ? -m / (d + 1e-4) : 0.0;
}

// HingeLoss over N items of K scores x, position k = item * K + class: the margin max(0, 1 + t x) with t = -1 for
// the item's label and 1 for the other classes; the term is the margin (L1) or its square (L2).
template <typename Dtype>
STRATA_HOST_DEVICE inline Term hinge_term(long long k, const Dtype* x, const Dtype* labels, int K, bool l2) {
  const int l = label_class(labels[k / K], K, false, 0);
  if (l < 0) return bad_label();
  const double m = fmax(0.0, 1 + (k % K == l ? -x[k] : x[k]));
  return counted(l2 ? m * m : m);
}
// Its derivative with respect to x[k]: t where the margin is active (L1), 2 m t (L2). The labels were checked by
// forward.
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype hinge_grad(long long k, const Dtype* x, const Dtype* labels, int K, bool l2) {
  const Dtype t = k % K == label_class(labels[k / K], K, false, 0) ? Dtype(-1) : Dtype(1);
  const Dtype m = Dtype(1) + t * x[k];
  if (m <= Dtype(0)) return Dtype(0);
  return l2 ? 2 * m * t : t;
}

// A probability clamped up to kLogThreshold (MultinomialLogisticLoss, InfogainLoss).
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype clamped(Dtype p) {
  return p > Dtype(kLogThreshold) ? p : Dtype(kLogThreshold);
}

// MultinomialLogisticLoss over N items of K probabilities p: item i's term is -log(max(p_label, 1e-20)).
template <typename Dtype>
STRATA_HOST_DEVICE inline Term logistic_term(long long i, const Dtype* p, const Dtype* labels, int K) {
  const int l = label_class(labels[i], K, false, 0);
  if (l < 0) return bad_label();
  return counted(-log(static_cast<double>(clamped(p[i * K + l]))));
}
// Its derivative with respect to p[k], k = item * K + class, without the sign: 1 / max(p, 1e-20) at the item's
// label, 0 elsewhere.
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype logistic_grad(long long k, const Dtype* p, const Dtype* labels, int K) {
  return k % K == label_class(labels[k / K], K, false, 0) ? Dtype(1) / clamped(p[k]) : Dtype(0);
}

// InfogainLoss over outer x inner positions of C probabilities p (p[(o * C + c) * inner + i]), H row-major C x C:
// position k = o * inner + i has the term -sum_c H[label, c] log(max(p_c, 1e-20)), unless its label is ignored.
template <typename Dtype>
STRATA_HOST_DEVICE inline Term infogain_term(long long k, const Dtype* p, const Dtype* labels, const Dtype* H, int C,
                                         int inner, bool has_ignore, int ignore) {
  const int l = label_class(labels[k], C, has_ignore, ignore);
  if (l == kIgnored) return skipped();
  if (l == kBad) return bad_label();
  const Dtype* fibre = p + (k / inner) * C * inner + k % inner;
  const Dtype* row = H + static_cast<long long>(l) * C;
  double sum = 0;
  for (int c = 0; c < C; ++c) sum -= row[c] * log(static_cast<double>(clamped(fibre[static_cast<long long>(c) * inner])));
  return counted(sum);
}
// Its derivative with respect to the score behind p[j] (j = (o * C + c) * inner + i): p_c sum_c' H[label, c'] -
// H[label, c] (row_sums[l] = sum_c' H[l, c']), 0 at an ignored position. The labels were checked by forward.
template <typename Dtype>
STRATA_HOST_DEVICE inline Dtype infogain_grad(long long j, const Dtype* p, const Dtype* labels, const Dtype* H,
                                          const Dtype* row_sums, int C, int inner, bool has_ignore, int ignore) {
  const long long i = j % inner, c = (j / inner) % C, o = j / (static_cast<long long>(inner) * C);
  const int l = label_class(labels[o * inner + i], C, has_ignore, ignore);
  if (l < 0) return Dtype(0);
  return p[j] * row_sums[l] - H[static_cast<long long>(l) * C + c];
}

// The sum of a loss's terms over positions [0, n): the counted terms' total, their number, and the first position
// with a bad label (LLONG_MAX when there is none).
struct Totals {
  double value = 0;
  long long counted = 0;
  long long first_bad = LLONG_MAX;
  bool has_bad_label() const { return first_bad != LLONG_MAX; }
};

#ifndef __CUDACC__
// The CPU's sum: term(k) gives position k's Term; `work` (the elementary operations of the whole loop) decides
// whether the loop is worth several threads.
template <typename F>
Totals sum_terms(long long n, long long work, F term) {
  double value = 0;
  long long num_counted = 0, first_bad = LLONG_MAX;
#pragma omp parallel for schedule(static) reduction(+ : value, num_counted) reduction(min : first_bad) \
    if (parallel_worthwhile(work))
  for (long long k = 0; k < n; ++k) {
    const Term t = term(k);
    if (t.status == kCounted) {
      value += t.value;
      ++num_counted;
    } else if (t.status == kBadLabel) {
      first_bad = std::min(first_bad, k);
    }
  }
  Totals totals;
  totals.value = value;
  totals.counted = num_counted;
  totals.first_bad = first_bad;
  return totals;
}

// f(k) for every k in [0, n), on several threads when `work` is worth it (the GPU's is gpu_for_each).
template <typename F>
void for_each(long long n, long long work, F f) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(work))
  for (long long k = 0; k < n; ++k) f(k);
}
#endif

}  // namespace loss
}  // namespace strata
