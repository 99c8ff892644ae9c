#include "strata/layers/pooling_layer.hpp"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <type_traits>

#include "counter_rng.hpp"
#include "cpu_engine.hpp"
#include "onednn_pooling.hpp"
#include "stochastic_pool.hpp"
#include "strata/cpu_dispatch.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// Below this many input values an OpenMP fork costs more than the loop.
constexpr long kParallelMin = 1 << 15;

// Caffe's pooled size: ceil (or floor) of (size + 2 pad - kernel) / stride, plus one, computed in float as
// Caffe does; with padding, a last window that would start in the padding is dropped.
int PooledSize(int size, int kernel, int pad, int stride, bool ceil_mode, bool any_pad) {
  const float steps = static_cast<float>(size + 2 * pad - kernel) / stride;
  int pooled = static_cast<int>(ceil_mode ? std::ceil(steps) : std::floor(steps)) + 1;
  if (any_pad && (pooled - 1) * stride >= size + pad) --pooled;
  return pooled;
}

// The input rows [h0, h1) under output row `ph` (the window clipped to the image).
template <typename Window>
inline void RowSpan(const Window& w, int ph, int* h0, int* h1) {
  const int hstart = ph * w.stride_h - w.pad_h;
  *h0 = std::max(hstart, 0);
  *h1 = std::min(hstart + w.kernel_h, w.height);
}

// The output columns [lo, hi) whose window column j (input column pw*stride_w - pad_w + j) is in the image.
template <typename Window>
inline void ColumnSpan(const Window& w, int j, int* lo, int* hi) {
  const int off = j - w.pad_w;  // input column of output column pw is pw*stride_w + off
  const int s = w.stride_w;
  *lo = std::min(std::max(off >= 0 ? 0 : (-off + s - 1) / s, 0), w.pooled_w);
  const int end = w.width - off;  // need pw*s < end
  *hi = std::max(std::min(end > 0 ? (end + s - 1) / s : 0, w.pooled_w), *lo);
}

// Max over each window of one plane, with Caffe's argmax: the first maximum in row-major order, i.e. the
// smallest index among equal maxima. Separable: for each output row, the max down each input column of the
// window rows (contiguous, vectorised), then across the window columns, both as compare-and-select loops over
// int indices so they vectorise. Empty windows (possible without padding when stride > kernel) give -FLT_MAX
// and index -1. `col_max`/`col_arg` hold one input row.
template <typename Dtype, typename Window>
STRATA_HOT_KERNEL void MaxPlane(const Dtype* x, const Window& w, Dtype* y, int* mask, Dtype* col_max, int* col_arg) {
  const int PW = w.pooled_w, W = w.width, stride = w.stride_w;
  Dtype* __restrict cm = col_max;
  int* __restrict ca = col_arg;
  for (int ph = 0; ph < w.pooled_h; ++ph) {
    Dtype* __restrict yr = y + ph * PW;
    int* __restrict mr = mask + ph * PW;
    std::fill(yr, yr + PW, Dtype(-FLT_MAX));
    std::fill(mr, mr + PW, -1);
    int h0, h1;
    RowSpan(w, ph, &h0, &h1);
    if (h0 >= h1) continue;
    // Down the columns: strict > keeps the first (smallest) row of equal maxima.
    std::copy(x + h0 * W, x + h0 * W + W, cm);
    for (int iw = 0; iw < W; ++iw) ca[iw] = h0 * W + iw;
    for (int ih = h0 + 1; ih < h1; ++ih) {
      const Dtype* __restrict xr = x + ih * W;
      const int base = ih * W;
      for (int iw = 0; iw < W; ++iw) {
        const bool larger = xr[iw] > cm[iw];
        cm[iw] = larger ? xr[iw] : cm[iw];
        ca[iw] = larger ? base + iw : ca[iw];
      }
    }
    // Across the window columns: of equal maxima, the smaller index (an earlier row) wins.
    for (int j = 0; j < w.kernel_w; ++j) {
      int lo, hi;
      ColumnSpan(w, j, &lo, &hi);
      const int off = j - w.pad_w;
      for (int pw = lo; pw < hi; ++pw) {
        const Dtype v = cm[pw * stride + off];
        const int at = ca[pw * stride + off];
        const bool better = v > yr[pw] || (v == yr[pw] && at < mr[pw]);
        yr[pw] = better ? v : yr[pw];
        mr[pw] = better ? at : mr[pw];
      }
    }
  }
}

// Sum over each window of one plane, divided by Caffe's window size; pixels are added in Caffe's order.
template <typename Dtype, typename Window>
STRATA_HOT_KERNEL void AvePlane(const Dtype* x, const Window& w, const Dtype* divisor, Dtype* y) {
  const int PW = w.pooled_w;
  for (int ph = 0; ph < w.pooled_h; ++ph) {
    Dtype* yr = y + ph * PW;
    std::fill(yr, yr + PW, Dtype(0));
    int h0, h1;
    RowSpan(w, ph, &h0, &h1);
    for (int ih = h0; ih < h1; ++ih) {
      const Dtype* xr = x + ih * w.width;
      for (int j = 0; j < w.kernel_w; ++j) {
        int lo, hi;
        ColumnSpan(w, j, &lo, &hi);
        const Dtype* xs = xr + j - w.pad_w;
        for (int pw = lo; pw < hi; ++pw) yr[pw] += xs[pw * w.stride_w];
      }
    }
    const Dtype* dr = divisor + ph * PW;
    for (int pw = 0; pw < PW; ++pw) yr[pw] /= dr[pw];
  }
}

// The adjoint of AvePlane into a zeroed dx. Kernel columns run backwards so that each pixel receives its
// outputs' shares in Caffe's order (output rows, then output columns, ascending).
template <typename Dtype, typename Window>
STRATA_HOT_KERNEL void AvePlaneBackward(const Dtype* dy, const Window& w, const Dtype* divisor, Dtype* dx) {
  const int PW = w.pooled_w;
  for (int ph = 0; ph < w.pooled_h; ++ph) {
    const Dtype* gr = dy + ph * PW;
    const Dtype* dr = divisor + ph * PW;
    int h0, h1;
    RowSpan(w, ph, &h0, &h1);
    for (int ih = h0; ih < h1; ++ih) {
      Dtype* xr = dx + ih * w.width;
      for (int j = w.kernel_w - 1; j >= 0; --j) {
        int lo, hi;
        ColumnSpan(w, j, &lo, &hi);
        Dtype* xs = xr + j - w.pad_w;
        for (int pw = lo; pw < hi; ++pw) xs[pw * w.stride_w] += gr[pw] / dr[pw];
      }
    }
  }
}

}  // namespace

template <typename Dtype>
void PoolingLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PoolingParameter& p = this->layer_param_.pooling_param();
  max_ = p.pool() == PoolingParameter::MAX;
  keeps_index_ = max_ || (stochastic() && this->phase_ == TRAIN);
  global_ = p.global_pooling();
  if (global_) {
    STRATA_REQUIRE(!p.has_kernel_size() && !p.has_kernel_h() && !p.has_kernel_w())
        << "with global_pooling: true the kernel size cannot be specified";
  } else {
    STRATA_REQUIRE(p.has_kernel_size() != (p.has_kernel_h() && p.has_kernel_w()))
        << "give the kernel as kernel_size or as kernel_h and kernel_w, not both";
    STRATA_REQUIRE(p.has_kernel_size() || (p.has_kernel_h() && p.has_kernel_w()))
        << "a non-square kernel needs both kernel_h and kernel_w";
    win_.kernel_h = static_cast<int>(p.has_kernel_size() ? p.kernel_size() : p.kernel_h());
    win_.kernel_w = static_cast<int>(p.has_kernel_size() ? p.kernel_size() : p.kernel_w());
    STRATA_REQUIRE(win_.kernel_h > 0 && win_.kernel_w > 0) << "kernel size must be positive";
  }
  STRATA_REQUIRE((!p.has_pad() && p.has_pad_h() && p.has_pad_w()) || (!p.has_pad_h() && !p.has_pad_w()))
      << "give the padding as pad or as pad_h and pad_w";
  STRATA_REQUIRE((!p.has_stride() && p.has_stride_h() && p.has_stride_w()) ||
                 (!p.has_stride_h() && !p.has_stride_w()))
      << "give the stride as stride or as stride_h and stride_w";
  win_.pad_h = static_cast<int>(p.has_pad_h() ? p.pad_h() : p.pad());
  win_.pad_w = static_cast<int>(p.has_pad_h() ? p.pad_w() : p.pad());
  STRATA_REQUIRE(!stochastic() || (win_.pad_h == 0 && win_.pad_w == 0))
      << "layer '" << this->layer_param_.name() << "': padding is implemented only for MAX and AVE pooling, not STOCHASTIC";
  win_.stride_h = static_cast<int>(p.has_stride_h() ? p.stride_h() : p.stride());
  win_.stride_w = static_cast<int>(p.has_stride_h() ? p.stride_w() : p.stride());
  STRATA_REQUIRE(win_.stride_h > 0 && win_.stride_w > 0) << "stride must be positive";
  if (global_) {
    STRATA_REQUIRE(win_.pad_h == 0 && win_.pad_w == 0 && win_.stride_h == 1 && win_.stride_w == 1)
        << "with global_pooling: true only pad 0 and stride 1 are allowed";
  } else {
    STRATA_REQUIRE(win_.pad_h < win_.kernel_h && win_.pad_w < win_.kernel_w)
        << "pad (" << win_.pad_h << ", " << win_.pad_w << ") must be smaller than the kernel (" << win_.kernel_h
        << ", " << win_.kernel_w << ")";
  }
  mask_.set_memory_category(MemoryCategory::kActivation);
  row_buffers_.set_memory_category(MemoryCategory::kWorkspace);

  onednn_.reset();
  const bool asked = p.engine() == PoolingParameter::ONEDNN;
  if (UseOneDnn<Dtype>(asked, p.engine() == PoolingParameter::DEFAULT, "Pooling", this->layer_param_.name())) {
    const char* why = stochastic()     ? "STOCHASTIC pooling has no oneDNN kernel"
                      : top.size() > 1 ? "oneDNN keeps no argmax mask to output as the second top"
                                       : nullptr;
    STRATA_REQUIRE(!asked || !why) << "Pooling layer '" << this->layer_param_.name() << "', engine ONEDNN: " << why
                                   << "; use DEFAULT or CAFFE";
    if (!why) onednn_ = std::make_shared<onednn_pool::Pooling>();
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() == 4)
      << "input must have 4 axes (num, channels, height, width), got shape " << bottom[0]->shape_string();
  Window& w = win_;
  w.height = bottom[0]->height();
  w.width = bottom[0]->width();
  if (global_) {
    w.kernel_h = w.height;
    w.kernel_w = w.width;
  }
  const bool ceil_mode = this->layer_param_.pooling_param().round_mode() == PoolingParameter::CEIL;
  const bool any_pad = w.pad_h > 0 || w.pad_w > 0;
  w.pooled_h = PooledSize(w.height, w.kernel_h, w.pad_h, w.stride_h, ceil_mode, any_pad);
  w.pooled_w = PooledSize(w.width, w.kernel_w, w.pad_w, w.stride_w, ceil_mode, any_pad);
  STRATA_REQUIRE(w.pooled_h > 0 && w.pooled_w > 0)
      << "the " << w.kernel_h << " x " << w.kernel_w << " kernel does not fit the " << w.height << " x "
      << w.width << " input (pad " << w.pad_h << ", " << w.pad_w << ")";
  const std::vector<int> top_shape{bottom[0]->num(), bottom[0]->channels(), w.pooled_h, w.pooled_w};
  top[0]->Reshape(top_shape);
  if (top.size() > 1) top[1]->Reshape(top_shape);
  // oneDNN where the engine allows it and its result is Caffe's for this shape (an error where ONEDNN was asked
  // for and it is not); an empty batch has nothing to compute.
  onednn_active_ = false;
  if (onednn_) {
    const onednn_pool::Shape s{bottom[0]->num(), bottom[0]->channels(), w.height,   w.width,
                               w.pooled_h,       w.pooled_w,            w.kernel_h, w.kernel_w,
                               w.stride_h,       w.stride_w,            w.pad_h,    w.pad_w,
                               max_};
    const char* why = onednn_pool::Mismatch(s);
    STRATA_REQUIRE(!why || this->layer_param_.pooling_param().engine() != PoolingParameter::ONEDNN)
        << "Pooling layer '" << this->layer_param_.name() << "', engine ONEDNN: for input "
        << bottom[0]->shape_string() << " " << why << "; use DEFAULT or CAFFE";
    if (!why && bottom[0]->count() > 0) {
      onednn_->Configure(s);
      onednn_active_ = true;
    }
  }
  if (keeps_index_) mask_.Reshape(top_shape);  // holds ints (no wider than Dtype)
  // Through oneDNN, MAX keeps oneDNN's record of the maxima in mask_'s memory instead (one byte or int per output).
  if (onednn_active_ && keeps_index_) {
    const size_t bytes = onednn_->workspace_bytes();
    if (bytes > mask_.count() * sizeof(Dtype)) {
      mask_.Reshape({static_cast<int>((bytes + sizeof(Dtype) - 1) / sizeof(Dtype))});
    }
  }
  if (max_) {
    thread_slots_ = std::max(1, omp_get_max_threads());
    row_buffers_.Reshape({2 * thread_slots_ * w.width});
  }
  if (!max_ && !stochastic()) {
    // Caffe's divisor: the window clipped to the padded image [-pad, size + pad). An empty window (possible
    // only without padding when the stride exceeds the kernel) divides by 1 rather than 0.
    divisor_.resize(static_cast<size_t>(w.pooled_h) * w.pooled_w);
    for (int ph = 0; ph < w.pooled_h; ++ph) {
      const int hstart = ph * w.stride_h - w.pad_h;
      const int rows = std::min(hstart + w.kernel_h, w.height + w.pad_h) - hstart;
      for (int pw = 0; pw < w.pooled_w; ++pw) {
        const int wstart = pw * w.stride_w - w.pad_w;
        const int cols = std::min(wstart + w.kernel_w, w.width + w.pad_w) - wstart;
        divisor_[ph * w.pooled_w + pw] = Dtype(std::max(rows * cols, 1));
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::StochasticForward_cpu(const Dtype* x, Dtype* y, int planes, uint64_t seed) {
  const Window w = win_;
  const long in_plane = static_cast<long>(w.height) * w.width;
  const long out_plane = static_cast<long>(w.pooled_h) * w.pooled_w;
  const bool train = this->phase_ == TRAIN;
  int* mask = train ? reinterpret_cast<int*>(mask_.mutable_cpu_data()) : nullptr;
#pragma omp parallel for schedule(static) if (planes * in_plane >= kParallelMin)
  for (int c = 0; c < planes; ++c) {
    for (int ph = 0; ph < w.pooled_h; ++ph) {
      int h0, h1;
      RowSpan(w, ph, &h0, &h1);
      for (int pw = 0; pw < w.pooled_w; ++pw) {
        const int w0 = pw * w.stride_w, w1 = std::min(w0 + w.kernel_w, w.width);
        const long o = c * out_plane + ph * w.pooled_w + pw;
        if (train) {
          const double u = counter_rng::uniform(seed, static_cast<uint64_t>(o));
          mask[o] = stochastic_pool::Pick(x + c * in_plane, w.width, h0, h1, w0, w1, u, &y[o]);
        } else {
          Dtype sum;
          y[o] = stochastic_pool::WeightedMean(x + c * in_plane, w.width, h0, h1, w0, w1, &sum);
        }
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::WeightedMeanBackward_cpu(const Dtype* x, const Dtype* dy, Dtype* dx, int planes) {
  const Window w = win_;
  const long in_plane = static_cast<long>(w.height) * w.width;
  const long out_plane = static_cast<long>(w.pooled_h) * w.pooled_w;
#pragma omp parallel for schedule(static) if (planes * in_plane >= kParallelMin)
  for (int c = 0; c < planes; ++c) {
    const Dtype* xc = x + c * in_plane;
    Dtype* dxc = dx + c * in_plane;
    std::fill(dxc, dxc + in_plane, Dtype(0));
    for (int ph = 0; ph < w.pooled_h; ++ph) {
      int h0, h1;
      RowSpan(w, ph, &h0, &h1);
      for (int pw = 0; pw < w.pooled_w; ++pw) {
        const int w0 = pw * w.stride_w, w1 = std::min(w0 + w.kernel_w, w.width);
        Dtype sum;
        const Dtype y = stochastic_pool::WeightedMean(xc, w.width, h0, h1, w0, w1, &sum);
        const Dtype g = dy[c * out_plane + ph * w.pooled_w + pw];
        for (int h = h0; h < h1; ++h) {
          for (int i = w0; i < w1; ++i) {
            dxc[h * w.width + i] += g * stochastic_pool::WeightedMeanGradient(xc[h * w.width + i], y, sum);
          }
        }
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_active_) {
      // A blocked input stays blocked, and so does the output where its readers take it so.
      const bool x_blocked = bottom[0]->data_layout() == MemoryFormat::kBlocked16 && onednn_->has_blocked();
      const bool y_blocked = x_blocked && this->top_may_block(0);
      const float* x = bottom[0]->cpu_data_in(x_blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain);
      float* y = top[0]->mutable_cpu_data_in(y_blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain, false);
      onednn_->Forward(x, y, keeps_index_ ? mask_.mutable_cpu_data() : nullptr, x_blocked, y_blocked);
      return;
    }
  }
  if (stochastic()) {
    // The seed is drawn in TRAIN only, as Dropout draws it: TEST consumes no random numbers.
    const uint64_t seed = this->phase_ == TRAIN ? Strata::draw_seed() : 0;
    StochasticForward_cpu(bottom[0]->cpu_data(), top[0]->mutable_cpu_data(), bottom[0]->num() * bottom[0]->channels(),
                          seed);
    return;
  }
  const Window w = win_;
  const int planes = bottom[0]->num() * bottom[0]->channels();
  const long in_plane = static_cast<long>(w.height) * w.width;
  const long out_plane = static_cast<long>(w.pooled_h) * w.pooled_w;
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  int* mask = max_ ? reinterpret_cast<int*>(mask_.mutable_cpu_data()) : nullptr;
  Dtype* mask_top = max_ && top.size() > 1 ? top[1]->mutable_cpu_data() : nullptr;
  const Dtype* divisor = divisor_.data();
  Dtype* rows = max_ ? row_buffers_.mutable_cpu_data() : nullptr;
  const bool parallel = planes * in_plane >= kParallelMin;
#pragma omp parallel for schedule(static) num_threads(thread_slots_) if (parallel)
  for (int c = 0; c < planes; ++c) {
    const Dtype* xc = x + c * in_plane;
    if (global_ && max_) {  // one window over the whole contiguous plane
      Dtype best = Dtype(-FLT_MAX);
      int arg = -1;
      for (int i = 0; i < in_plane; ++i) {
        if (xc[i] > best) {
          best = xc[i];
          arg = i;
        }
      }
      y[c] = best;
      mask[c] = arg;
    } else if (global_) {
      Dtype sum = 0;
      for (long i = 0; i < in_plane; ++i) sum += xc[i];
      y[c] = sum / divisor[0];
    } else if (max_) {
      // This thread's row of column maxima and, in the same number of Dtype slots, their int indices.
      Dtype* col_max = rows + 2L * omp_get_thread_num() * w.width;
      MaxPlane(xc, w, y + c * out_plane, mask + c * out_plane, col_max, reinterpret_cast<int*>(col_max + w.width));
    } else {
      AvePlane(xc, w, divisor, y + c * out_plane);
    }
    if (mask_top) {
      for (long i = c * out_plane; i < (c + 1) * out_plane; ++i) mask_top[i] = Dtype(mask[i]);
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_active_) {
      // The gradients in the layouts of their data (as the layers beside this one wrote and read those).
      const bool dy_blocked = top[0]->diff_layout() == MemoryFormat::kBlocked16 && onednn_->has_blocked();
      const bool dx_blocked = bottom[0]->data_layout() == MemoryFormat::kBlocked16 && onednn_->has_blocked();
      const float* dy = top[0]->cpu_diff_in(dy_blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain);
      float* dx = bottom[0]->mutable_cpu_diff_in(dx_blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain, false);
      onednn_->Backward(dy, dx, keeps_index_ ? mask_.mutable_cpu_data() : nullptr, dy_blocked, dx_blocked);
      return;
    }
  }
  if (stochastic() && !keeps_index_) {
    WeightedMeanBackward_cpu(bottom[0]->cpu_data(), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff(),
                             bottom[0]->num() * bottom[0]->channels());
    return;
  }
  const Window w = win_;
  const int planes = bottom[0]->num() * bottom[0]->channels();
  const long in_plane = static_cast<long>(w.height) * w.width;
  const long out_plane = static_cast<long>(w.pooled_h) * w.pooled_w;
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int* mask = keeps_index_ ? reinterpret_cast<const int*>(mask_.cpu_data()) : nullptr;
  const Dtype* divisor = divisor_.data();
  const bool parallel = planes * in_plane >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int c = 0; c < planes; ++c) {
    Dtype* dxc = dx + c * in_plane;
    const Dtype* dyc = dy + c * out_plane;
    if (global_ && !keeps_index_) {
      const Dtype g = dyc[0] / divisor[0];
      std::fill(dxc, dxc + in_plane, g);
      continue;
    }
    std::fill(dxc, dxc + in_plane, Dtype(0));
    if (keeps_index_) {
      const int* mc = mask + c * out_plane;
      for (long i = 0; i < out_plane; ++i) {
        if (mc[i] >= 0) dxc[mc[i]] += dyc[i];
      }
    } else {
      AvePlaneBackward(dyc, w, divisor, dxc);
    }
  }
}

STRATA_INSTANTIATE_CLASS(PoolingLayer);
REGISTER_LAYER_CLASS(Pooling);

}  // namespace strata
