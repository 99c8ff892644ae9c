#include "strata/layers/bias_layer.hpp"

#include <algorithm>

#include <omp.h>

#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {
// Below this many elements a loop runs on one thread: starting the team would cost more than it saves.
constexpr long long kParallelMin = 1 << 15;
// Reductions run over blocks of at most this many d.
constexpr int kColumnBlock = 128;

template <bool kScale, bool kShift, typename Dtype>
void affine_rows(int rows, int dim, const Dtype* x, const Dtype* scale, const Dtype* shift, Dtype* y,
                 bool parallel) {
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; ++r) {
    const Dtype* xr = x + static_cast<size_t>(r) * dim;
    Dtype* yr = y + static_cast<size_t>(r) * dim;
#pragma omp simd
    for (int d = 0; d < dim; ++d) {
      Dtype v = xr[d];
      if (kScale) v *= scale[d];
      if (kShift) v += shift[d];
      yr[d] = v;
    }
  }
}
}  // namespace

template <typename Dtype>
std::vector<int> BroadcastParamShape(const Blob<Dtype>& x, int axis_param, int num_axes) {
  const int axis = x.CanonicalAxisIndex(axis_param);
  STRATA_REQUIRE(num_axes >= -1) << "num_axes must be non-negative, or -1 for all axes from `axis` on, got "
                                 << num_axes;
  STRATA_REQUIRE(num_axes == -1 || axis + num_axes <= x.num_axes())
      << "axis " << axis << " with num_axes " << num_axes << " extends past the bottom of shape "
      << x.shape_string();
  const auto begin = x.shape().begin() + axis;
  return std::vector<int>(begin, num_axes == -1 ? x.shape().end() : begin + num_axes);
}

template <typename Dtype>
BroadcastGeometry BroadcastGeometryOf(const Blob<Dtype>& x, const Blob<Dtype>& p, int axis_param, const char* what) {
  const int axis = p.num_axes() == 0 ? 0 : x.CanonicalAxisIndex(axis_param);
  STRATA_REQUIRE(x.num_axes() >= axis + p.num_axes())
      << what << " of shape " << p.shape_string() << " placed at axis " << axis
      << " extends past the bottom of shape " << x.shape_string();
  for (int i = 0; i < p.num_axes(); ++i) {
    STRATA_REQUIRE(x.shape(axis + i) == p.shape(i))
        << what << " of shape " << p.shape_string() << " does not match the bottom of shape " << x.shape_string()
        << " at axis " << axis + i;
  }
  BroadcastGeometry g;
  g.outer = x.count(0, axis);
  g.dim = p.count();
  g.inner = x.count(axis + p.num_axes());
  return g;
}

namespace {

// The blocked layout's forms: rows of inner * 16 values, lane j of channel block cb being channel cb * 16 + j.
template <typename Dtype>
void affine_blocked(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift, Dtype* y) {
  constexpr int B = kChannelBlock16;
  CHECK_EQ(g.dim % B, 0) << "the blocked layout needs channels in multiples of 16";
  const int blocks = g.dim / B, rows = g.outer * blocks;
  const bool parallel = static_cast<long long>(g.outer) * g.dim * g.inner >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; ++r) {
    const int c0 = (r % blocks) * B;
    Dtype s[B], b[B];
    for (int j = 0; j < B; ++j) {
      s[j] = scale ? scale[c0 + j] : Dtype(1);
      b[j] = shift ? shift[c0 + j] : Dtype(0);
    }
    const Dtype* xr = x + static_cast<size_t>(r) * g.inner * B;
    Dtype* yr = y + static_cast<size_t>(r) * g.inner * B;
    for (int i = 0; i < g.inner; ++i) {
#pragma omp simd
      for (int j = 0; j < B; ++j) yr[i * B + j] = xr[i * B + j] * s[j] + b[j];
    }
  }
}

template <typename Dtype>
void reduce_blocked(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out) {
  constexpr int B = kChannelBlock16;
  CHECK_EQ(g.dim % B, 0) << "the blocked layout needs channels in multiples of 16";
  const int blocks = g.dim / B;
  const bool parallel = static_cast<long long>(g.outer) * g.dim * g.inner >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int cb = 0; cb < blocks; ++cb) {
    double acc[B] = {};
    for (int o = 0; o < g.outer; ++o) {
      const size_t row = (static_cast<size_t>(o) * blocks + cb) * g.inner * B;
      const Dtype* ar = a + row;
      const Dtype* br = b ? b + row : nullptr;
      // Per row in Dtype, lane by lane, then into the double totals (as row_sum does for the plain layout).
      Dtype part[B] = {};
      for (int i = 0; i < g.inner; ++i) {
        if (br) {
#pragma omp simd
          for (int j = 0; j < B; ++j) part[j] += ar[i * B + j] * br[i * B + j];
        } else {
#pragma omp simd
          for (int j = 0; j < B; ++j) part[j] += ar[i * B + j];
        }
      }
      for (int j = 0; j < B; ++j) acc[j] += part[j];
    }
    for (int j = 0; j < B; ++j) {
      out[cb * B + j] = static_cast<Dtype>(accumulate ? out[cb * B + j] + acc[j] : acc[j]);
    }
  }
}

}  // namespace

template <typename Dtype>
void broadcast_affine(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift,
                      Dtype* y, MemoryFormat layout) {
  if (layout == MemoryFormat::kBlocked16) {
    affine_blocked(g, x, scale, shift, y);
    return;
  }
  const bool parallel = static_cast<long long>(g.outer) * g.dim * g.inner >= kParallelMin;
  if (g.inner == 1) {
    // One value per row element: vectorise along the rows.
    if (scale && shift) {
      affine_rows<true, true>(g.outer, g.dim, x, scale, shift, y, parallel);
    } else if (scale) {
      affine_rows<true, false>(g.outer, g.dim, x, scale, shift, y, parallel);
    } else if (shift) {
      affine_rows<false, true>(g.outer, g.dim, x, scale, shift, y, parallel);
    } else {
      cpu_copy(g.outer * g.dim, x, y);
    }
    return;
  }
  const int rows = g.outer * g.dim;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; ++r) {
    const int d = r % g.dim;
    const Dtype s = scale ? scale[d] : Dtype(1);
    const Dtype b = shift ? shift[d] : Dtype(0);
    const Dtype* xr = x + static_cast<size_t>(r) * g.inner;
    Dtype* yr = y + static_cast<size_t>(r) * g.inner;
#pragma omp simd
    for (int i = 0; i < g.inner; ++i) yr[i] = xr[i] * s + b;
  }
}

template <typename Dtype>
void broadcast_reduce(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out,
                      MemoryFormat layout) {
  if (layout == MemoryFormat::kBlocked16) {
    reduce_blocked(g, a, b, accumulate, out);
    return;
  }
  const bool parallel = static_cast<long long>(g.outer) * g.dim * g.inner >= kParallelMin;
  // Blocks of d run in parallel, each visiting its part of every outer slice in one contiguous run.
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int block = std::max(1, std::min(kColumnBlock, (g.dim + threads - 1) / threads));
  const int blocks = (g.dim + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel)
  for (int blk = 0; blk < blocks; ++blk) {
    const int d0 = blk * block;
    const int nd = std::min(block, g.dim - d0);
    double acc[kColumnBlock] = {};
    for (int o = 0; o < g.outer; ++o) {
      const size_t slice = (static_cast<size_t>(o) * g.dim + d0) * g.inner;
      const Dtype* as = a + slice;
      const Dtype* bs = b ? b + slice : nullptr;
      if (g.inner == 1) {
        // One value per d: vectorise along d.
        if (bs) {
#pragma omp simd
          for (int j = 0; j < nd; ++j) acc[j] += as[j] * bs[j];
        } else {
#pragma omp simd
          for (int j = 0; j < nd; ++j) acc[j] += as[j];
        }
        continue;
      }
      for (int j = 0; j < nd; ++j) {
        const Dtype* ar = as + static_cast<size_t>(j) * g.inner;
        if (bs) {
          const Dtype* br = bs + static_cast<size_t>(j) * g.inner;
          acc[j] += row_sum<Dtype>(0, g.inner, [=](int i) { return ar[i] * br[i]; });
        } else {
          acc[j] += row_sum<Dtype>(0, g.inner, [=](int i) { return ar[i]; });
        }
      }
    }
    for (int j = 0; j < nd; ++j) out[d0 + j] = static_cast<Dtype>(accumulate ? out[d0 + j] + acc[j] : acc[j]);
  }
}

#define STRATA_INSTANTIATE_BROADCAST(Dtype)                                                                  \
  template std::vector<int> BroadcastParamShape<Dtype>(const Blob<Dtype>&, int, int);                      \
  template BroadcastGeometry BroadcastGeometryOf<Dtype>(const Blob<Dtype>&, const Blob<Dtype>&, int,        \
                                                        const char*);                                       \
  template void broadcast_affine<Dtype>(const BroadcastGeometry&, const Dtype*, const Dtype*, const Dtype*, \
                                        Dtype*, MemoryFormat);                                                    \
  template void broadcast_reduce<Dtype>(const BroadcastGeometry&, const Dtype*, const Dtype*, bool, Dtype*,  \
                                        MemoryFormat)
STRATA_INSTANTIATE_BROADCAST(float);
STRATA_INSTANTIATE_BROADCAST(double);

template <typename Dtype>
void BiasLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BiasParameter& p = this->layer_param_.bias_param();
  if (bottom.size() > 1) {
    STRATA_REQUIRE(this->blobs_.empty()) << "with two bottoms the bias is bottom[1], so the layer has no "
                                         << "parameter blob, got " << this->blobs_.size();
  } else if (!this->blobs_.empty()) {
    STRATA_REQUIRE(this->blobs_.size() == 1) << "expected 1 parameter blob (the bias), got " << this->blobs_.size();
  } else {
    // The filler defaults to constant 0: the layer starts as the identity.
    this->blobs_.push_back(
        std::make_shared<Blob<Dtype>>(BroadcastParamShape(*bottom[0], p.axis(), p.num_axes())));
    GetFiller<Dtype>(p.filler())->Fill(this->blobs_[0].get());
  }
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Dtype>
void BiasLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& bias = bottom.size() > 1 ? *bottom[1] : *this->blobs_[0];
  geom_ = BroadcastGeometryOf(*bottom[0], bias, this->layer_param_.bias_param().axis(), "bias");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void BiasLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& bias = bottom.size() > 1 ? *bottom[1] : *this->blobs_[0];
  broadcast_affine<Dtype>(geom_, bottom[0]->cpu_data(), nullptr, bias.cpu_data(), top[0]->mutable_cpu_data());
}

template <typename Dtype>
void BiasLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const Dtype* dy = top[0]->cpu_diff();
  const bool bias_is_bottom = bottom.size() > 1;
  if (bias_is_bottom ? propagate_down[1] : this->param_propagate_down(0)) {
    // A parameter's gradient accumulates; a bottom's is written.
    Dtype* db = bias_is_bottom ? bottom[1]->mutable_cpu_diff() : this->blobs_[0]->mutable_cpu_diff();
    broadcast_reduce<Dtype>(geom_, dy, nullptr, !bias_is_bottom, db);
  }
  if (propagate_down[0] && bottom[0] != top[0]) cpu_copy(bottom[0]->count(), dy, bottom[0]->mutable_cpu_diff());
}

STRATA_INSTANTIATE_CLASS(BiasLayer);
REGISTER_LAYER_CLASS(Bias);

}  // namespace strata
