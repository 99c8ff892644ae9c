#include "strata/layers/lrn_layer.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_engine.hpp"
#include "onednn_lrn.hpp"
#include "strata/cpu_dispatch.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// ACROSS_CHANNELS works on blocks of this many contiguous pixels of one image, all channels.
constexpr int kBlock = 512;
// Below this many values an OpenMP fork costs more than the loop.
constexpr long kParallelMin = 1 << 15;

// q[i] = s[i]^-beta, without pow() for the common betas: 1 / (sqrt(s) * sqrt(sqrt(s))) for 0.75, 1 / sqrt(s)
// for 0.5. These loops vectorise because this file is compiled with -fno-math-errno (CMakeLists.txt): otherwise
// every sqrt would keep a scalar path that sets errno for negative input, which nothing here reads.
template <typename Dtype>
STRATA_HOT_KERNEL void NegativePower(int n, const Dtype* __restrict s, Dtype beta, Dtype* __restrict q) {
  if (beta == Dtype(0.75)) {
    for (int i = 0; i < n; ++i) {
      const Dtype r = std::sqrt(s[i]);
      q[i] = Dtype(1) / (r * std::sqrt(r));
    }
  } else if (beta == Dtype(0.5)) {
    for (int i = 0; i < n; ++i) q[i] = Dtype(1) / std::sqrt(s[i]);
  } else if (beta == Dtype(1)) {
    for (int i = 0; i < n; ++i) q[i] = Dtype(1) / s[i];
  } else {
    for (int i = 0; i < n; ++i) q[i] = std::pow(s[i], -beta);
  }
}

// out[h][w] = sum of v[h][w + d] for |d| <= pad, zero outside the row.
template <typename Dtype>
STRATA_HOT_KERNEL void RowWindowSums(const Dtype* v, int H, int W, int pad, Dtype* out) {
  for (int h = 0; h < H; ++h) {
    const Dtype* vr = v + h * W;
    Dtype* o = out + h * W;
    std::fill(o, o + W, Dtype(0));
    for (int d = -pad; d <= pad; ++d) {
      for (int w = std::max(0, -d); w < std::min(W, W - d); ++w) o[w] += vr[w + d];
    }
  }
}

// row[w] = sum of rows[h + d][w] for |d| <= pad, zero outside the plane: with RowWindowSums, the sum over the
// square window centred on (h, w).
template <typename Dtype>
STRATA_HOT_KERNEL void ColumnWindowSum(const Dtype* rows, int H, int W, int pad, int h, Dtype* row) {
  std::fill(row, row + W, Dtype(0));
  for (int r = std::max(0, h - pad); r <= std::min(H - 1, h + pad); ++r) {
    const Dtype* src = rows + r * W;
    for (int w = 0; w < W; ++w) row[w] += src[w];
  }
}

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LRNParameter& p = this->layer_param_.lrn_param();
  size_ = static_cast<int>(p.local_size());
  STRATA_REQUIRE(size_ % 2 == 1) << "lrn_param.local_size must be odd, got " << size_;
  alpha_ = p.alpha();
  beta_ = p.beta();
  k_ = p.k();
  across_ = p.norm_region() == LRNParameter::ACROSS_CHANNELS;
  scale_.set_memory_category(MemoryCategory::kActivation);
  workspace_.set_memory_category(MemoryCategory::kWorkspace);

  onednn_ = MakeOneDnnEngine<onednn_lrn::LRN, Dtype>(p, "LRN", this->layer_param_.name());
}

template <typename Dtype>
void LRNLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() == 4)
      << "input must have 4 axes (num, channels, height, width), got shape " << bottom[0]->shape_string();
  num_ = bottom[0]->num();
  channels_ = bottom[0]->channels();
  height_ = bottom[0]->height();
  width_ = bottom[0]->width();
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  // oneDNN's primitives for this shape (kept when it is the last one's); an empty batch has nothing to compute.
  // Its record of the forward takes the scale's place (oneDNN's JIT kernels keep twice as many values).
  onednn_active_ = onednn_ && bottom[0]->count() > 0;
  if (onednn_active_) {
    onednn_->Configure({num_, channels_, height_, width_, size_, static_cast<float>(alpha_),
                        static_cast<float>(beta_), static_cast<float>(k_), across_});
    const size_t bytes = onednn_->workspace_bytes();
    if (bytes > scale_.count() * sizeof(Dtype)) {
      scale_.Reshape({static_cast<int>((bytes + sizeof(Dtype) - 1) / sizeof(Dtype))});
    }
    return;
  }
  if (!across_) {
    thread_slots_ = std::max(1, omp_get_max_threads());
    workspace_.Reshape({thread_slots_ * 2 * (height_ * width_ + width_)});
  }
}

template <typename Dtype>
void LRNLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      if (onednn_active_) {
        onednn_->Forward(bottom[0]->cpu_data(), top[0]->mutable_cpu_data(), scale_.mutable_cpu_data());
      }
      return;
    }
  }
  if (across_) {
    AcrossForward(bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  } else {
    WithinForward(bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  }
}

template <typename Dtype>
void LRNLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      if (onednn_active_) {
        onednn_->Backward(bottom[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
                          scale_.mutable_cpu_data());
      }
      return;
    }
  }
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (across_) {
    AcrossBackward(x, y, dy, dx);
  } else {
    WithinBackward(x, y, dy, dx);
  }
}

// scale_c = scale_{c-1} + alpha/n * (x_{c+pre}^2 - x_{c-pre-1}^2), starting from k + alpha/n * sum of the first
// pre+1 channels; y = x * scale^-beta. One task is a block of pixels of one image, through all channels.
template <typename Dtype>
STRATA_HOT_KERNEL void LRNLayer<Dtype>::AcrossForward(const Dtype* x, Dtype* y) {
  const int C = channels_, HW = height_ * width_, pre = (size_ - 1) / 2;
  const int blocks = (HW + kBlock - 1) / kBlock;
  const Dtype an = alpha_ / size_, k = k_, beta = beta_;
  Dtype* scale = scale_.mutable_cpu_data();
  const long tasks = static_cast<long>(num_) * blocks;
#pragma omp parallel for schedule(static) if (static_cast<long>(num_) * C * HW >= kParallelMin)
  for (long t = 0; t < tasks; ++t) {
    const int p0 = static_cast<int>(t % blocks) * kBlock, len = std::min(kBlock, HW - p0);
    const long base = (t / blocks) * C * HW + p0;
    const Dtype* xb = x + base;
    Dtype* sb = scale + base;
    Dtype q[kBlock];
    for (int c = 0; c < C; ++c) {
      Dtype* s = sb + static_cast<long>(c) * HW;
      if (c == 0) {
        std::fill(s, s + len, k);
        for (int h = 0; h <= std::min(pre, C - 1); ++h) {
          const Dtype* xh = xb + static_cast<long>(h) * HW;
          for (int i = 0; i < len; ++i) s[i] += an * xh[i] * xh[i];
        }
      } else {
        // The channel entering the window (head) and the one leaving it (tail); a missing one adds 0.
        const int head = c + pre, tail = c - pre - 1;
        const Dtype ah = head < C ? an : Dtype(0), at = tail >= 0 ? an : Dtype(0);
        const Dtype* xh = xb + static_cast<long>(std::min(head, C - 1)) * HW;
        const Dtype* xt = xb + static_cast<long>(std::max(tail, 0)) * HW;
        const Dtype* prev = s - HW;
        for (int i = 0; i < len; ++i) s[i] = prev[i] + ah * xh[i] * xh[i] - at * xt[i] * xt[i];
      }
      NegativePower(len, s, beta, q);
      const Dtype* xc = xb + static_cast<long>(c) * HW;
      Dtype* yc = y + base + static_cast<long>(c) * HW;
      for (int i = 0; i < len; ++i) yc[i] = xc[i] * q[i];
    }
  }
}

// dx_c = dy_c * scale_c^-beta - 2 alpha beta / n * x_c * (sum over the channel window of dy * y / scale), the
// window sum again slid as a running sum.
template <typename Dtype>
STRATA_HOT_KERNEL void LRNLayer<Dtype>::AcrossBackward(const Dtype* x, const Dtype* y, const Dtype* dy, Dtype* dx) {
  const int C = channels_, HW = height_ * width_, pre = (size_ - 1) / 2;
  const int blocks = (HW + kBlock - 1) / kBlock;
  const Dtype coef = Dtype(2) * alpha_ * beta_ / size_, beta = beta_;
  const Dtype* scale = scale_.cpu_data();
  const long tasks = static_cast<long>(num_) * blocks;
#pragma omp parallel for schedule(static) if (static_cast<long>(num_) * C * HW >= kParallelMin)
  for (long t = 0; t < tasks; ++t) {
    const int p0 = static_cast<int>(t % blocks) * kBlock, len = std::min(kBlock, HW - p0);
    const long base = (t / blocks) * C * HW + p0;
    Dtype q[kBlock], acc[kBlock];
    std::fill(acc, acc + len, Dtype(0));
    for (int c = 0; c < C; ++c) {
      const long off = base + static_cast<long>(c) * HW;
      const int first = c == 0 ? 0 : c + pre;               // channels entering the window: [first, last]
      const int last = c == 0 ? std::min(pre, C - 1) : c + pre;
      for (int h = first; h <= last && h < C; ++h) {
        const long o = base + static_cast<long>(h) * HW;
        for (int i = 0; i < len; ++i) acc[i] += dy[o + i] * y[o + i] / scale[o + i];
      }
      if (c - pre - 1 >= 0) {
        const long o = base + static_cast<long>(c - pre - 1) * HW;
        for (int i = 0; i < len; ++i) acc[i] -= dy[o + i] * y[o + i] / scale[o + i];
      }
      NegativePower(len, scale + off, beta, q);
      for (int i = 0; i < len; ++i) dx[off + i] = dy[off + i] * q[i] - coef * x[off + i] * acc[i];
    }
  }
}

// scale = 1 + alpha * (window sum of x^2) / (n*n) (Caffe's average pooling with pad (n-1)/2, which always
// divides by n*n), y = x * scale^-beta. One plane per task.
template <typename Dtype>
STRATA_HOT_KERNEL void LRNLayer<Dtype>::WithinForward(const Dtype* x, Dtype* y) {
  const int H = height_, W = width_, HW = H * W, pre = (size_ - 1) / 2, planes = num_ * channels_;
  const Dtype nn = Dtype(size_ * size_), alpha = alpha_, beta = beta_;
  Dtype* scale = scale_.mutable_cpu_data();
  Dtype* ws = workspace_.mutable_cpu_data();
#pragma omp parallel for schedule(static) num_threads(thread_slots_) if (static_cast<long>(planes) * HW >= kParallelMin)
  for (int c = 0; c < planes; ++c) {
    Dtype* sq = ws + static_cast<long>(omp_get_thread_num()) * 2 * (HW + W);
    Dtype* rows = sq + HW;
    Dtype* q = rows + HW;
    const Dtype* xc = x + static_cast<long>(c) * HW;
    for (int i = 0; i < HW; ++i) sq[i] = xc[i] * xc[i];
    RowWindowSums(sq, H, W, pre, rows);
    for (int h = 0; h < H; ++h) {
      Dtype* s = scale + static_cast<long>(c) * HW + h * W;
      ColumnWindowSum(rows, H, W, pre, h, s);
      for (int w = 0; w < W; ++w) s[w] = Dtype(1) + alpha * (s[w] / nn);
      NegativePower(W, s, beta, q);
      Dtype* yr = y + static_cast<long>(c) * HW + h * W;
      for (int w = 0; w < W; ++w) yr[w] = xc[h * W + w] * q[w];
    }
  }
}

// dx = dy * scale^-beta - 2 alpha beta / (n*n) * x * (window sum of dy * y / scale).
template <typename Dtype>
STRATA_HOT_KERNEL void LRNLayer<Dtype>::WithinBackward(const Dtype* x, const Dtype* y, const Dtype* dy, Dtype* dx) {
  const int H = height_, W = width_, HW = H * W, pre = (size_ - 1) / 2, planes = num_ * channels_;
  const Dtype coef = Dtype(2) * alpha_ * beta_ / Dtype(size_ * size_), beta = beta_;
  const Dtype* scale = scale_.cpu_data();
  Dtype* ws = workspace_.mutable_cpu_data();
#pragma omp parallel for schedule(static) num_threads(thread_slots_) if (static_cast<long>(planes) * HW >= kParallelMin)
  for (int c = 0; c < planes; ++c) {
    Dtype* ratio = ws + static_cast<long>(omp_get_thread_num()) * 2 * (HW + W);
    Dtype* rows = ratio + HW;
    Dtype* acc = rows + HW;
    Dtype* q = acc + W;
    const long off = static_cast<long>(c) * HW;
    for (int i = 0; i < HW; ++i) ratio[i] = dy[off + i] * y[off + i] / scale[off + i];
    RowWindowSums(ratio, H, W, pre, rows);
    for (int h = 0; h < H; ++h) {
      const long o = off + h * W;
      ColumnWindowSum(rows, H, W, pre, h, acc);
      NegativePower(W, scale + o, beta, q);
      for (int w = 0; w < W; ++w) dx[o + w] = dy[o + w] * q[w] - coef * x[o + w] * acc[w];
    }
  }
}

STRATA_INSTANTIATE_CLASS(LRNLayer);
REGISTER_LAYER_CLASS(LRN);

}  // namespace strata
