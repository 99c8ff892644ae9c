#include "strata/layers/batch_norm_layer.hpp"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "neuron_math.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/bias_layer.hpp"

namespace strata {

namespace {
// Below this many elements a loop runs on one thread: starting the team would cost more than it saves.
constexpr long long kParallelMin = 1 << 15;
constexpr int kChannelBlock = 64;

// Visits an (N, C, S) blob in blocks of channels, in two passes: `term_a(i, c)` and `term_b(i, c)` are the
// two quantities of element i summed per channel; `finish(c, sum_a, sum_b)` turns the sums into per-channel
// coefficients; `apply(i, c)` writes element i. Blocks run in parallel, and each visits its channels row by
// row (n), so that it reads the block's part of a row, (c1 - c0) * S values, in one contiguous run the
// prefetcher can follow (one channel at a time would jump C * S values after every S, which is slow for the
// short rows of late layers; smaller blocks that stay in L2 for the second pass measured slower too).
template <typename Dtype, typename TermA, typename TermB, typename Finish, typename Apply>
void TwoPassPerChannel(int N, int C, int S, const TermA& term_a, const TermB& term_b, const Finish& finish,
                       const Apply& apply) {
  const bool parallel = static_cast<long long>(N) * C * S >= kParallelMin;
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int block = std::max(1, std::min(kChannelBlock, (C + threads - 1) / threads));
  const int blocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * block;
    const int c1 = std::min(C, c0 + block);
    double sum_a[kChannelBlock] = {}, sum_b[kChannelBlock] = {};
    for (int n = 0; n < N; ++n) {
      if (S == 1) {
        // A channel's values lie C apart: vectorise along the row instead.
#pragma omp simd
        for (int c = c0; c < c1; ++c) {
          sum_a[c - c0] += term_a(n * C + c, c);
          sum_b[c - c0] += term_b(n * C + c, c);
        }
        continue;
      }
      for (int c = c0; c < c1; ++c) {
        // The second run over the row reads it from L1.
        const int base = (n * C + c) * S;
        sum_a[c - c0] += row_sum<Dtype>(base, base + S, [&](int i) { return term_a(i, c); });
        sum_b[c - c0] += row_sum<Dtype>(base, base + S, [&](int i) { return term_b(i, c); });
      }
    }
    for (int c = c0; c < c1; ++c) finish(c, sum_a[c - c0], sum_b[c - c0]);
    for (int n = 0; n < N; ++n) {
      if (S == 1) {
#pragma omp simd
        for (int c = c0; c < c1; ++c) apply(n * C + c, c);
        continue;
      }
      for (int c = c0; c < c1; ++c) {
        const int base = (n * C + c) * S;
#pragma omp simd
        for (int i = base; i < base + S; ++i) apply(i, c);
      }
    }
  }
}

// The same in the channel-blocked layout (memory_format.hpp): blocks of 16 channels run in parallel, each reading
// rows of S * 16 values in which lane j is channel cb * 16 + j.
template <typename Dtype, typename TermA, typename TermB, typename Finish, typename Apply>
void TwoPassPerChannelBlocked(int N, int C, int S, const TermA& term_a, const TermB& term_b, const Finish& finish,
                              const Apply& apply) {
  constexpr int B = kChannelBlock16;
  const int blocks = C / B;
  const bool parallel = static_cast<long long>(N) * C * S >= kParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int cb = 0; cb < blocks; ++cb) {
    const int c0 = cb * B;
    double sum_a[B] = {}, sum_b[B] = {};
    for (int n = 0; n < N; ++n) {
      const int base = (n * blocks + cb) * S * B;
      // Per row in Dtype, lane by lane, then into the double totals.
      Dtype part_a[B] = {}, part_b[B] = {};
      for (int s = 0; s < S; ++s) {
#pragma omp simd
        for (int j = 0; j < B; ++j) {
          part_a[j] += term_a(base + s * B + j, c0 + j);
          part_b[j] += term_b(base + s * B + j, c0 + j);
        }
      }
      for (int j = 0; j < B; ++j) {
        sum_a[j] += part_a[j];
        sum_b[j] += part_b[j];
      }
    }
    for (int j = 0; j < B; ++j) finish(c0 + j, sum_a[j], sum_b[j]);
    for (int n = 0; n < N; ++n) {
      const int base = (n * blocks + cb) * S * B;
      for (int s = 0; s < S; ++s) {
#pragma omp simd
        for (int j = 0; j < B; ++j) apply(base + s * B + j, c0 + j);
      }
    }
  }
}

// Either form, by layout.
template <typename Dtype, typename TermA, typename TermB, typename Finish, typename Apply>
void TwoPass(MemoryFormat layout, int N, int C, int S, const TermA& term_a, const TermB& term_b, const Finish& finish,
             const Apply& apply) {
  if (layout == MemoryFormat::kBlocked16) {
    TwoPassPerChannelBlocked<Dtype>(N, C, S, term_a, term_b, finish, apply);
  } else {
    TwoPassPerChannel<Dtype>(N, C, S, term_a, term_b, finish, apply);
  }
}
}  // namespace

template <typename Dtype>
void BatchNormLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BatchNormParameter& p = this->layer_param_.batch_norm_param();
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : this->phase_ == TEST;
  moving_average_fraction_ = p.moving_average_fraction();
  eps_ = p.eps();
  // The running sums decay by the fraction each iteration: above 1 they grow without bound, below 0 they flip
  // sign (1 is the plain average over every batch so far).
  STRATA_REQUIRE(p.moving_average_fraction() >= 0 && p.moving_average_fraction() <= 1)
      << "batch_norm_param.moving_average_fraction is " << p.moving_average_fraction()
      << "; it must be in [0, 1] (Caffe's default 0.999)";
  STRATA_REQUIRE(p.eps() >= 0) << "batch_norm_param.eps is " << p.eps() << "; it must not be negative";
  if (p.eps() == 0) {
    // Caffe takes it, and a hand computation may want it; a channel of equal values then divides by 0.
    LOG(WARNING) << this->describe() << ": batch_norm_param.eps is 0: a channel of equal values divides by 0";
  }
  STRATA_REQUIRE(bottom[0]->num_axes() >= 1) << "the bottom must have at least one axis";
  channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
  if (!this->blobs_.empty()) {
    // Statistics came with the layer (a caffemodel).
    STRATA_REQUIRE(this->blobs_.size() == 3)
        << "expected 3 blobs (mean, variance, scale factor), got " << this->blobs_.size();
    STRATA_REQUIRE(this->blobs_[0]->count() == channels_ && this->blobs_[1]->count() == channels_ &&
                   this->blobs_[2]->count() == 1)
        << "the stored statistics have shapes " << this->blobs_[0]->shape_string() << ", "
        << this->blobs_[1]->shape_string() << ", " << this->blobs_[2]->shape_string() << "; " << channels_
        << " channels need " << channels_ << ", " << channels_ << " and 1 values";
  } else {
    for (const std::vector<int>& shape : std::initializer_list<std::vector<int>>{{channels_}, {channels_}, {1}}) {
      this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
      cpu_set(this->blobs_.back()->count(), Dtype(0), this->blobs_.back()->mutable_cpu_data());
    }
  }
  // The statistics are never learned: lr_mult 0 for each (Net reads these specs after SetUp).
  for (int i = 0; i < 3; ++i) {
    if (this->layer_param_.param_size() == i) {
      this->layer_param_.add_param()->set_lr_mult(0);
    } else {
      STRATA_REQUIRE(this->layer_param_.param(i).lr_mult() == 0)
          << "param " << i << " has lr_mult " << this->layer_param_.param(i).lr_mult()
          << ": the batch statistics cannot be learned, their lr_mult must be 0";
    }
  }
  this->param_propagate_down_.assign(3, false);
  for (Blob<Dtype>* b : {&mean_, &variance_, &inv_std_, &x_hat_}) b->set_memory_category(MemoryCategory::kActivation);
  grad_mean_.set_memory_category(MemoryCategory::kWorkspace);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() >= 1) << "the bottom must have at least one axis";
  const int channels = x.num_axes() == 1 ? 1 : x.shape(1);
  STRATA_REQUIRE(channels == channels_)
      << "the bottom of shape " << x.shape_string() << " has " << channels << " channels, the layer was set up for "
      << channels_;
  num_ = x.shape(0);
  spatial_ = x.num_axes() > 2 ? x.count(2) : 1;
  if (top[0] != bottom[0]) top[0]->ReshapeLike(x);
  mean_.Reshape({channels_});
  variance_.Reshape({channels_});
  inv_std_.Reshape({channels_});
  grad_mean_.Reshape({2, channels_});
  if (!use_global_stats_) x_hat_.ReshapeLike(x);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom[0]->count() == 0) return;
  layout_ = this->ElementwiseLayout(bottom, top);
  const Dtype* x = bottom[0]->cpu_data_in(layout_);
  Dtype* y = top[0]->mutable_cpu_data_in(layout_, top[0] == bottom[0]);
  Dtype* mean = mean_.mutable_cpu_data();
  Dtype* variance = variance_.mutable_cpu_data();
  Dtype* inv_std = inv_std_.mutable_cpu_data();
  const int C = channels_, S = spatial_;
  const Dtype eps = eps_;
  Dtype* run_mean = this->blobs_[0]->mutable_cpu_data();
  Dtype* run_var = this->blobs_[1]->mutable_cpu_data();
  Dtype* factor = this->blobs_[2]->mutable_cpu_data();

  if (use_global_stats_) {
    // y = x * (1/std) + (-mean/std), the shift kept in variance_.
    const Dtype norm = factor[0] == 0 ? Dtype(0) : Dtype(1) / factor[0];
    for (int c = 0; c < C; ++c) {
      mean[c] = run_mean[c] * norm;
      inv_std[c] = Dtype(1) / std::sqrt(run_var[c] * norm + eps);
      variance[c] = -mean[c] * inv_std[c];
    }
    broadcast_affine<Dtype>(BroadcastGeometry{num_, C, S}, x, inv_std, variance, y, layout_);
    return;
  }

  Dtype* x_hat = x_hat_.mutable_cpu_data();  // in layout_'s order
  const double m = static_cast<double>(num_) * S;
  // Each channel's sums are shifted by its first value x0, against cancellation; x0 waits in mean[] until the
  // channel's finish replaces it, so every term reads it from one contiguous vector in either layout.
  const bool blocked = layout_ == MemoryFormat::kBlocked16;
  for (int c = 0; c < C; ++c) {
    mean[c] = x[blocked ? (c / kChannelBlock16) * S * kChannelBlock16 + c % kChannelBlock16 : c * S];
  }
  // y = post(x_hat, c): x_hat itself, or what an absorbed Scale (and ReLU) make of it.
  const auto normalise = [&](const auto& post) {
    TwoPass<Dtype>(
        layout_, num_, C, S,
        // Sums of d = x - x0 and d^2.
        [=](int i, int c) { return x[i] - mean[c]; },
        [=](int i, int c) {
          const Dtype d = x[i] - mean[c];
          return d * d;
        },
        [=](int c, double sum_d, double sum_d2) {
          const double mean_d = sum_d / m;
          const double var = std::max(0.0, sum_d2 / m - mean_d * mean_d);
          mean[c] = static_cast<Dtype>(mean[c] + mean_d);
          variance[c] = static_cast<Dtype>(var);
          inv_std[c] = static_cast<Dtype>(1.0 / std::sqrt(var + eps));
        },
        [=](int i, int c) {
          const Dtype v = (x[i] - mean[c]) * inv_std[c];
          x_hat[i] = v;
          y[i] = post(v, c);
        });
  };
  if (!scale_) {
    normalise([](Dtype v, int) { return v; });
  } else {
    // The absorbed Scale (and ReLU), as their own forwards compute them.
    const Dtype* gamma = scale_->blobs()[0]->cpu_data();
    const Dtype* beta = AbsorbedBias();
    const auto affine = [=](Dtype v, int c) { return v * gamma[c] + beta[c]; };
    if (!relu_) {
      normalise(affine);
    } else if (relu_->negative_slope() == Dtype(0)) {
      normalise([=](Dtype v, int c) { return neuron::relu(affine(v, c)); });
    } else {
      const Dtype slope = relu_->negative_slope();
      normalise([=](Dtype v, int c) { return neuron::leaky_relu(affine(v, c), slope); });
    }
  }

  // Running sums; the unbiased variance as Caffe keeps it.
  const Dtype maf = moving_average_fraction_;
  const Dtype correction = m > 1 ? static_cast<Dtype>(m / (m - 1)) : Dtype(1);
  factor[0] = factor[0] * maf + 1;
  for (int c = 0; c < C; ++c) {
    run_mean[c] = maf * run_mean[c] + mean[c];
    run_var[c] = maf * run_var[c] + correction * variance[c];
  }
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  // With an absorbed Scale its parameter gradients are due even without the bottom's.
  if (bottom[0]->count() == 0 || (!propagate_down[0] && !scale_)) return;
  // In the forward's layout, which x_hat_ is in.
  const Dtype* dy = top[0]->cpu_diff_in(layout_);
  Dtype* dx = bottom[0]->mutable_cpu_diff_in(layout_, top[0] == bottom[0]);
  const Dtype* inv_std = inv_std_.cpu_data();
  const int C = channels_;
  if (use_global_stats_) {
    // The statistics are constants: dx = dy / std.
    broadcast_affine<Dtype>(BroadcastGeometry{num_, C, spatial_}, dy, inv_std, nullptr, dx, layout_);
    return;
  }
  // dx = (g - mean(g) - x_hat * mean(g * x_hat)) / std, g being dy, or with an absorbed Scale gamma times its own
  // output's gradient (through the absorbed ReLU). In place dx is dy, read and written per element.
  const Dtype* x_hat = x_hat_.cpu_data();
  Dtype* mean_dy = grad_mean_.mutable_cpu_data();
  Dtype* mean_dy_xhat = mean_dy + C;
  const double m = static_cast<double>(num_) * spatial_;
  if (!scale_) {
    TwoPass<Dtype>(
        layout_, num_, C, spatial_,
        [=](int i, int c) { return dy[i]; }, [=](int i, int c) { return dy[i] * x_hat[i]; },
        [=](int c, double sum_dy, double sum_dy_xhat) {
          mean_dy[c] = static_cast<Dtype>(sum_dy / m);
          mean_dy_xhat[c] = static_cast<Dtype>(sum_dy_xhat / m);
        },
        [=](int i, int c) { dx[i] = inv_std[c] * (dy[i] - mean_dy[c] - x_hat[i] * mean_dy_xhat[c]); });
    return;
  }
  // The Scale's gradients, as its backward computes them: d gamma += sum(g_s * x_hat), d beta += sum(g_s), where g_s
  // is the gradient of the Scale's output; and the BatchNorm's g = gamma * g_s.
  const Dtype* gamma = scale_->blobs()[0]->cpu_data();
  const Dtype* beta = AbsorbedBias();
  Dtype* dgamma = scale_->param_propagate_down(0) ? scale_->blobs()[0]->mutable_cpu_diff() : nullptr;
  Dtype* dbeta = scale_->blobs().size() > 1 && scale_->param_propagate_down(1)
                     ? scale_->blobs()[1]->mutable_cpu_diff() : nullptr;
  const auto backward_through_scale = [&](const auto& grad) {  // grad(i, c) = g_s
    const auto term_a = [=](int i, int c) { return grad(i, c); };
    const auto term_b = [=](int i, int c) { return grad(i, c) * x_hat[i]; };
    const auto finish = [=](int c, double sum_g, double sum_g_xhat) {
      if (dgamma) dgamma[c] = static_cast<Dtype>(dgamma[c] + sum_g_xhat);
      if (dbeta) dbeta[c] = static_cast<Dtype>(dbeta[c] + sum_g);
      mean_dy[c] = static_cast<Dtype>(gamma[c] * sum_g / m);
      mean_dy_xhat[c] = static_cast<Dtype>(gamma[c] * sum_g_xhat / m);
    };
    if (propagate_down[0]) {
      TwoPass<Dtype>(layout_, num_, C, spatial_, term_a, term_b, finish, [=](int i, int c) {
        dx[i] = inv_std[c] * (gamma[c] * grad(i, c) - mean_dy[c] - x_hat[i] * mean_dy_xhat[c]);
      });
    } else {
      TwoPass<Dtype>(layout_, num_, C, spatial_, term_a, term_b, finish, [](int, int) {});
    }
  };
  if (!relu_) {
    backward_through_scale([=](int i, int) { return dy[i]; });
  } else {
    // The ReLU's test on its input z = gamma * x_hat + beta, recomputed as the forward computed it.
    const Dtype slope = relu_->negative_slope();
    backward_through_scale([=](int i, int c) {
      return dy[i] * neuron::relu_gradient_factor(x_hat[i] * gamma[c] + beta[c], slope);
    });
  }
}

template <typename Dtype>
bool BatchNormLayer<Dtype>::Absorb(Layer<Dtype>& next) {
  if (use_global_stats_) return false;
  if (!scale_) {
    auto* scale = dynamic_cast<ScaleLayer<Dtype>*>(&next);
    if (!scale || !scale->scales_channels()) return false;
    scale_ = scale;
    if (scale_->blobs().size() == 1) zero_bias_.assign(channels_, Dtype(0));  // no bias_term
    return true;
  }
  if (relu_) return false;
  relu_ = dynamic_cast<ReLULayer<Dtype>*>(&next);
  return relu_ != nullptr;
}

template <typename Dtype>
const Dtype* BatchNormLayer<Dtype>::AbsorbedBias() const {
  return scale_->blobs().size() > 1 ? scale_->blobs()[1]->cpu_data() : zero_bias_.data();
}

STRATA_INSTANTIATE_CLASS(BatchNormLayer);
REGISTER_LAYER_CLASS(BatchNorm);

}  // namespace strata
