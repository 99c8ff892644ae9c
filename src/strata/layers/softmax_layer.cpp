#include "strata/layers/softmax_layer.hpp"

#include <algorithm>
#include <type_traits>

#include "activation_kernels.hpp"
#include "cpu_engine.hpp"
#include "onednn_softmax.hpp"
#include "strata/cpu_dispatch.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// With inner > 1 a fibre is strided; positions are then processed kTile at a time, so the running max, sum
// and dot live on the stack and every inner loop runs over contiguous memory.
constexpr int kTile = 256;

// Calls f(x_offset, len) for every fibre block: a whole contiguous fibre when inner == 1 (len = channels), a
// tile of up to kTile strided fibres otherwise. Blocks are spread over threads when the blob is large.
template <typename F>
void for_each_block(int outer, int channels, int inner, F f) {
  const bool parallel = act::use_threads(static_cast<long long>(outer) * channels * inner);
  const int tiles = (inner + kTile - 1) / kTile;
  const long long blocks = static_cast<long long>(outer) * tiles;
#pragma omp parallel for schedule(static) if (parallel)
  for (long long b = 0; b < blocks; ++b) {
    const long long o = b / tiles;
    const int i0 = static_cast<int>(b % tiles) * kTile;
    f(static_cast<size_t>(o) * channels * inner + i0, std::min(kTile, inner - i0));
  }
}

// The blocks' work, one kernel per case (STRATA_HOT_KERNEL: each block runs the AVX2 copy where there is one).

// y = softmax(x) over one contiguous fibre of C values.
template <typename Dtype>
STRATA_HOT_KERNEL void SoftmaxFibre(const Dtype* x, Dtype* y, int C) {
  Dtype m = x[0];
#pragma omp simd reduction(max : m)
  for (int c = 0; c < C; ++c) m = std::max(m, x[c]);
  Dtype s = 0;
#pragma omp simd reduction(+ : s)
  for (int c = 0; c < C; ++c) {
    const Dtype e = act::exp(x[c] - m);
    y[c] = e;
    s += e;
  }
  const Dtype inv = Dtype(1) / s;
#pragma omp simd
  for (int c = 0; c < C; ++c) y[c] *= inv;
}

// The same over `len` <= kTile fibres whose values are `inner` apart (position i of channel c at c * inner + i).
template <typename Dtype>
STRATA_HOT_KERNEL void SoftmaxTile(const Dtype* x, Dtype* y, int C, int inner, int len) {
  Dtype m[kTile], s[kTile];
  std::copy(x, x + len, m);
  for (int c = 1; c < C; ++c) {
    const Dtype* xc = x + static_cast<size_t>(c) * inner;
#pragma omp simd
    for (int i = 0; i < len; ++i) m[i] = std::max(m[i], xc[i]);
  }
  std::fill(s, s + len, Dtype(0));
  for (int c = 0; c < C; ++c) {
    const Dtype* xc = x + static_cast<size_t>(c) * inner;
    Dtype* yc = y + static_cast<size_t>(c) * inner;
#pragma omp simd
    for (int i = 0; i < len; ++i) {
      const Dtype e = act::exp(xc[i] - m[i]);
      yc[i] = e;
      s[i] += e;
    }
  }
#pragma omp simd
  for (int i = 0; i < len; ++i) s[i] = Dtype(1) / s[i];
  for (int c = 0; c < C; ++c) {
    Dtype* yc = y + static_cast<size_t>(c) * inner;
#pragma omp simd
    for (int i = 0; i < len; ++i) yc[i] *= s[i];
  }
}

// dx = (dy - dy . y) * y over one contiguous fibre. dx may be dy: all of dy is read for the dot first.
template <typename Dtype>
STRATA_HOT_KERNEL void SoftmaxFibreBackward(const Dtype* y, const Dtype* dy, Dtype* dx, int C) {
  Dtype d = 0;
#pragma omp simd reduction(+ : d)
  for (int c = 0; c < C; ++c) d += dy[c] * y[c];
#pragma omp simd
  for (int c = 0; c < C; ++c) dx[c] = (dy[c] - d) * y[c];
}

template <typename Dtype>
STRATA_HOT_KERNEL void SoftmaxTileBackward(const Dtype* y, const Dtype* dy, Dtype* dx, int C, int inner, int len) {
  Dtype d[kTile] = {};
  for (int c = 0; c < C; ++c) {
    const size_t base = static_cast<size_t>(c) * inner;
#pragma omp simd
    for (int i = 0; i < len; ++i) d[i] += dy[base + i] * y[base + i];
  }
  for (int c = 0; c < C; ++c) {
    const size_t base = static_cast<size_t>(c) * inner;
#pragma omp simd
    for (int i = 0; i < len; ++i) dx[base + i] = (dy[base + i] - d[i]) * y[base + i];
  }
}

}  // namespace

template <typename Dtype>
void SoftmaxLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  onednn_ = MakeOneDnnEngine<onednn_softmax::Softmax, Dtype>(this->layer_param_.softmax_param(), "Softmax",
                                                             this->layer_param_.name());
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() > 0) << "softmax needs a bottom with at least one axis";
  const int axis = bottom[0]->CanonicalAxisIndex(this->layer_param_.softmax_param().axis());
  outer_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  top[0]->ReshapeLike(*bottom[0]);
  if (onednn_ && bottom[0]->count() > 0) onednn_->Configure(outer_, channels_, inner_);
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  const int C = channels_, inner = inner_;
  if (bottom[0]->count() == 0) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) return onednn_->Forward(x, y);
  }
  if (inner == 1) {
    for_each_block(outer_, C, 1, [=](size_t off, int) { SoftmaxFibre(x + off, y + off, C); });
  } else {
    for_each_block(outer_, C, inner, [=](size_t off, int len) { SoftmaxTile(x + off, y + off, C, inner, len); });
  }
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int C = channels_, inner = inner_;
  if (top[0]->count() == 0) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) return onednn_->Backward(y, dy, dx);
  }
  // dx may be dy (in place): each block reads all of its dy for the dot before it writes dx.
  if (inner == 1) {
    for_each_block(outer_, C, 1, [=](size_t off, int) { SoftmaxFibreBackward(y + off, dy + off, dx + off, C); });
  } else {
    for_each_block(outer_, C, inner,
                   [=](size_t off, int len) { SoftmaxTileBackward(y + off, dy + off, dx + off, C, inner, len); });
  }
}

STRATA_INSTANTIATE_CLASS(SoftmaxLayer);
REGISTER_LAYER_CLASS(Softmax);

}  // namespace strata
