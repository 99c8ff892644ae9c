// The one gradient checker every layer test uses: compares a layer's Backward against centred finite
// differences of its Forward, in double precision.
//
// The objective is L = sum_t sum_j r_tj * top_t[j] with fixed random weights r (so no two outputs cancel and
// every output's gradient path is exercised); Backward is run with top diff = r, and each input and parameter
// value x is then perturbed by +-h: dL/dx ~ (L(x+h) - L(x-h)) / 2h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "strata/blob.hpp"
#include "strata/layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
class GradientChecker {
 public:
  using BlobVec = std::vector<Blob<Dtype>*>;

  // `kink` / `kink_range`: values of x within kink_range of kink are skipped (non-differentiable points such
  // as ReLU at 0). `seed` reseeds the RNG before every Forward so stochastic layers (Dropout) replay.
  explicit GradientChecker(Dtype stepsize = 1e-3, Dtype threshold = 1e-5, unsigned seed = 1701, Dtype kink = 0,
                           Dtype kink_range = -1)
      : stepsize_(stepsize), threshold_(threshold), seed_(seed), kink_(kink), kink_range_(kink_range) {}

  // Checks the gradient of every bottom (or only `check_bottom` when >= 0) and every parameter blob.
  void CheckGradient(Layer<Dtype>* layer, const BlobVec& bottom, const BlobVec& top, int check_bottom = -1) {
    CheckGradientImpl(layer, bottom, top, check_bottom, true);
  }
  // Same, but only the bottoms (for layers whose parameters are not learned, or checked elsewhere).
  void CheckBottomGradients(Layer<Dtype>* layer, const BlobVec& bottom, const BlobVec& top, int check_bottom = -1) {
    CheckGradientImpl(layer, bottom, top, check_bottom, false);
  }

  // Number of values compared in the last check (so a test can assert it checked something).
  int last_num_checked() const { return num_checked_; }

 private:
  Dtype Objective(Layer<Dtype>* layer, const BlobVec& bottom, const BlobVec& top) {
    Strata::set_random_seed(seed_);
    layer->Forward(bottom, top);
    Dtype l = 0;
    for (size_t t = 0; t < top.size(); ++t) {
      const Dtype* y = top[t]->cpu_data();
      for (int j = 0; j < top[t]->count(); ++j) l += weights_[t][j] * y[j];
    }
    return l;
  }

  void CheckGradientImpl(Layer<Dtype>* layer, const BlobVec& bottom, const BlobVec& top, int check_bottom,
                         bool check_params) {
    layer->SetUp(bottom, top);
    // The objective's weights on every top.
    Strata::set_random_seed(seed_ + 1);
    weights_.assign(top.size(), {});
    for (size_t t = 0; t < top.size(); ++t) {
      weights_[t].resize(top[t]->count());
      rng_uniform<Dtype>(top[t]->count(), Dtype(-1), Dtype(1), weights_[t].data());
    }
    // Blobs to check and, for each, whether it is a bottom.
    std::vector<Blob<Dtype>*> checked;
    std::vector<bool> propagate_down(bottom.size(), check_bottom < 0);
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (check_bottom < 0 || static_cast<int>(b) == check_bottom) {
        checked.push_back(bottom[b]);
        propagate_down[b] = true;
      }
    }
    if (check_params) {
      for (auto& p : layer->blobs()) checked.push_back(p.get());
    }

    // Analytic gradients.
    for (auto& p : layer->blobs()) cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    for (Blob<Dtype>* b : bottom) cpu_set(b->count(), Dtype(0), b->mutable_cpu_diff());
    Objective(layer, bottom, top);
    for (size_t t = 0; t < top.size(); ++t) cpu_copy(top[t]->count(), weights_[t].data(), top[t]->mutable_cpu_diff());
    layer->Backward(top, propagate_down, bottom);
    std::vector<std::vector<Dtype>> analytic(checked.size());
    for (size_t i = 0; i < checked.size(); ++i) {
      analytic[i].assign(checked[i]->cpu_diff(), checked[i]->cpu_diff() + checked[i]->count());
    }
    CheckDeclaredReads(layer, bottom, top, propagate_down, checked, analytic);

    // Every perturbed forward repeats the first (layers that carry state from one forward to the next start
    // again from where the first started).
    layer->set_replaying(true);
    num_checked_ = 0;
    for (size_t i = 0; i < checked.size(); ++i) {
      Blob<Dtype>* blob = checked[i];
      for (int k = 0; k < blob->count(); ++k) {
        const Dtype x = blob->cpu_data()[k];
        if (kink_range_ > 0 && std::fabs(x - kink_) < kink_range_) continue;
        blob->mutable_cpu_data()[k] = x + stepsize_;
        const Dtype plus = Objective(layer, bottom, top);
        blob->mutable_cpu_data()[k] = x - stepsize_;
        const Dtype minus = Objective(layer, bottom, top);
        blob->mutable_cpu_data()[k] = x;
        const Dtype numeric = (plus - minus) / (Dtype(2) * stepsize_);
        const Dtype a = analytic[i][k];
        const Dtype scale = std::max<Dtype>({std::fabs(a), std::fabs(numeric), Dtype(1)});
        EXPECT_NEAR(a, numeric, threshold_ * scale)
            << "blob " << i << (i < checked.size() - layer->blobs().size() || !check_params ? " (bottom)" : " (param)")
            << " element " << k << " of shape " << blob->shape_string();
        ++num_checked_;
      }
    }
    layer->set_replaying(false);
    EXPECT_GT(num_checked_, 0) << "the gradient check compared nothing";
  }

  // Blob lifetimes (docs/recompute.md) free what a layer says its backward does not read (BackwardNeedsBottomData,
  // BackwardNeedsTopData): backward again with that data set to NaN must give the same gradients, bit for bit.
  // A blob that is both a bottom and a top (aliased data: Flatten, Split) is read as the other, so it stays.
  void CheckDeclaredReads(Layer<Dtype>* layer, const BlobVec& bottom, const BlobVec& top,
                          const std::vector<bool>& propagate_down, const std::vector<Blob<Dtype>*>& checked,
                          const std::vector<std::vector<Dtype>>& analytic) {
    const auto aliased = [](Blob<Dtype>* b, const BlobVec& others) {
      return std::any_of(others.begin(), others.end(), [&](Blob<Dtype>* o) { return o->data() == b->data(); });
    };
    std::vector<Blob<Dtype>*> unread;
    // A layer that rebuilds its bottoms writes them back in backward (to rounding): its own tests hold that.
    if (!layer->BackwardNeedsBottomData() && !layer->RebuildsBottomsInBackward())
      for (Blob<Dtype>* b : bottom)
        if (!aliased(b, top)) unread.push_back(b);
    if (!layer->BackwardNeedsTopData())
      for (Blob<Dtype>* t : top)
        if (!aliased(t, bottom)) unread.push_back(t);
    if (unread.empty()) return;
    std::vector<std::vector<Dtype>> kept(unread.size());
    for (size_t u = 0; u < unread.size(); ++u) {
      kept[u].assign(unread[u]->cpu_data(), unread[u]->cpu_data() + unread[u]->count());
      cpu_set(unread[u]->count(), std::numeric_limits<Dtype>::quiet_NaN(), unread[u]->mutable_cpu_data());
    }
    for (auto& p : layer->blobs()) cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    for (Blob<Dtype>* b : bottom) cpu_set(b->count(), Dtype(0), b->mutable_cpu_diff());
    for (size_t t = 0; t < top.size(); ++t) cpu_copy(top[t]->count(), weights_[t].data(), top[t]->mutable_cpu_diff());
    layer->Backward(top, propagate_down, bottom);
    for (size_t i = 0; i < checked.size(); ++i) {
      const Dtype* d = checked[i]->cpu_diff();
      int k = 0;
      while (k < checked[i]->count() && std::memcmp(&d[k], &analytic[i][k], sizeof(Dtype)) == 0) ++k;
      EXPECT_EQ(k, checked[i]->count())
          << layer->type() << "'s backward reads data it declares it does not (BackwardNeedsBottomData "
          << layer->BackwardNeedsBottomData() << ", BackwardNeedsTopData " << layer->BackwardNeedsTopData()
          << "): with that data NaN, blob " << i << " element " << k << " of its gradient is " << d[k] << ", not "
          << analytic[i][k];
    }
    for (size_t u = 0; u < unread.size(); ++u) {
      cpu_copy(unread[u]->count(), kept[u].data(), unread[u]->mutable_cpu_data());
    }
  }

  Dtype stepsize_, threshold_;
  unsigned seed_;
  Dtype kink_, kink_range_;
  std::vector<std::vector<Dtype>> weights_;
  int num_checked_ = 0;
};

// Fills a blob with values from U(lo, hi) using a fixed seed.
template <typename Dtype>
void FillUniform(Blob<Dtype>* blob, Dtype lo, Dtype hi, unsigned seed = 1) {
  Strata::set_random_seed(seed);
  rng_uniform<Dtype>(blob->count(), lo, hi, blob->mutable_cpu_data());
}

}  // namespace strata
