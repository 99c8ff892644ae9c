#include "strata/layers/prelu_layer.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "neuron_math.hpp"
#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/bias_layer.hpp"  // row_sum

namespace strata {

namespace {

// The blob as (outer, channels, inner) with one slope per channel; `shared`: one slope for every element.
struct SlopeGeometry {
  int outer, channels, inner;
  bool shared;
  long long count() const { return static_cast<long long>(outer) * channels * inner; }
};

// y[k] = f(a[k], b[k], slope of k's channel) over the blob, vectorised along the contiguous run of one slope
// (the whole blob when shared; a channel's inner values; a row of channels when inner is 1), on several
// threads when the blob is large. y may be a or b.
template <typename Dtype, typename F>
STRATA_HOT_KERNEL void slope_map(const SlopeGeometry& g, const Dtype* slope, const Dtype* a, const Dtype* b,
                                 Dtype* y, F f) {
  const bool threads = act::use_threads(g.count());
  if (g.shared) {
    const int n = static_cast<int>(g.count());
    const Dtype s = slope[0];
#pragma omp parallel for simd schedule(static) if (parallel : threads)
    for (int i = 0; i < n; ++i) y[i] = f(a[i], b[i], s);
  } else if (g.inner == 1) {
#pragma omp parallel for schedule(static) if (threads)
    for (int o = 0; o < g.outer; ++o) {
      const size_t off = static_cast<size_t>(o) * g.channels;
#pragma omp simd
      for (int c = 0; c < g.channels; ++c) y[off + c] = f(a[off + c], b[off + c], slope[c]);
    }
  } else {
    const int rows = g.outer * g.channels;
#pragma omp parallel for schedule(static) if (threads)
    for (int r = 0; r < rows; ++r) {
      const Dtype s = slope[r % g.channels];
      const size_t off = static_cast<size_t>(r) * g.inner;
#pragma omp simd
      for (int i = 0; i < g.inner; ++i) y[off + i] = f(a[off + i], b[off + i], s);
    }
  }
}

// diff[c] += the sum of x dy over the x <= 0 of channel c (diff[0]: of the blob when shared), in a fixed order
// whatever the number of threads: contiguous runs are summed in parallel, then added in order.
template <typename Dtype>
STRATA_HOT_KERNEL void slope_gradient(const SlopeGeometry& g, const Dtype* x, const Dtype* dy, Dtype* diff) {
  // Caffe's x (x <= 0): NaN inputs give NaN, as there. A select, not a product with the comparison, so that
  // the loops have no branch and vectorise (GCC turned the product into a compare-and-branch).
  auto term = [x, dy](size_t k) { return neuron::select(x[k] <= Dtype(0), x[k], x[k] * Dtype(0)) * dy[k]; };
  const bool threads = act::use_threads(g.count());
  if (!g.shared && g.inner == 1) {
    // One value per channel in each outer slice: a column sum per channel.
#pragma omp parallel for schedule(static) if (threads)
    for (int c = 0; c < g.channels; ++c) {
      double acc = 0;
      for (int o = 0; o < g.outer; ++o) acc += term(static_cast<size_t>(o) * g.channels + c);
      diff[c] += static_cast<Dtype>(acc);
    }
    return;
  }
  // Runs: a channel's inner values, or fixed-size pieces of the whole blob when shared.
  constexpr int kPiece = 16384;
  const long long n = g.count();
  const int len = g.shared ? kPiece : g.inner;
  const int runs = g.shared ? static_cast<int>((n + kPiece - 1) / kPiece) : g.outer * g.channels;
  std::vector<double> partial(runs);
#pragma omp parallel for schedule(static) if (threads)
  for (int r = 0; r < runs; ++r) {
    const size_t begin = static_cast<size_t>(r) * len;
    const int end = static_cast<int>(std::min<long long>(len, n - static_cast<long long>(begin)));
    partial[r] = row_sum<Dtype>(0, end, [&](int i) { return term(begin + i); });
  }
  if (g.shared) {
    double acc = 0;
    for (double p : partial) acc += p;
    diff[0] += static_cast<Dtype>(acc);
    return;
  }
  for (int c = 0; c < g.channels; ++c) {
    double acc = 0;
    for (int o = 0; o < g.outer; ++o) acc += partial[static_cast<size_t>(o) * g.channels + c];
    diff[c] += static_cast<Dtype>(acc);
  }
}

}  // namespace

template <typename Dtype>
void PReLULayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() >= 2)
      << this->describe() << " needs a bottom with at least 2 axes (its channels are axis 1), got shape "
      << bottom[0]->shape_string();
  const PReLUParameter& p = this->layer_param_.prelu_param();
  channel_shared_ = p.channel_shared();
  const int channels = bottom[0]->shape(1);
  if (this->blobs_.empty()) {
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>(channel_shared_ ? std::vector<int>{}
                                                                         : std::vector<int>{channels}));
    FillerParameter filler = p.filler();
    if (!p.has_filler()) {
      filler.set_type("constant");
      filler.set_value(0.25f);
    }
    GetFiller<Dtype>(filler)->Fill(this->blobs_[0].get());
  }
  // Parameters that came with the layer (a caffemodel) must fit the configuration.
  STRATA_REQUIRE(this->blobs_.size() == 1)
      << this->describe() << " has one parameter blob (the slopes), got " << this->blobs_.size();
  const int want = channel_shared_ ? 1 : channels;
  STRATA_REQUIRE(this->blobs_[0]->count() == want)
      << this->describe() << ": the slope blob has " << this->blobs_[0]->count() << " value(s) but "
      << (channel_shared_ ? "channel_shared needs 1" : "the bottom has " + std::to_string(channels) + " channels");
  this->param_propagate_down_.assign(1, true);
}

template <typename Dtype>
void PReLULayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() >= 2) << this->describe()
                                    << " needs a bottom with at least 2 axes (its channels are axis 1), got shape "
                                    << x.shape_string();
  STRATA_REQUIRE(channel_shared_ || x.shape(1) == this->blobs_[0]->count())
      << this->describe() << " has " << this->blobs_[0]->count() << " slopes but the bottom "
      << x.shape_string() << " has " << x.shape(1) << " channels";
  outer_ = x.shape(0);
  channels_ = x.shape(1);
  inner_ = x.count(2);
  NeuronLayer<Dtype>::Reshape(bottom, top);
  input_.Reshape(x, bottom[0] == top[0]);
}

template <typename Dtype>
void PReLULayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  input_.Keep(*bottom[0], bottom[0] == top[0]);
  const Dtype* x = bottom[0]->cpu_data();
  slope_map<Dtype>({outer_, channels_, inner_, channel_shared_}, this->blobs_[0]->cpu_data(), x, x,
                   top[0]->mutable_cpu_data(),
                   [](Dtype v, Dtype, Dtype s) { return neuron::select(v > Dtype(0), v, s * v); });
}

template <typename Dtype>
void PReLULayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const SlopeGeometry g{outer_, channels_, inner_, channel_shared_};
  const Dtype* x = input_.cpu_input(*bottom[0], bottom[0] == top[0]);
  const Dtype* dy = top[0]->cpu_diff();
  // The slopes' gradient first: in place, writing the bottom's diff overwrites the top's.
  if (this->param_propagate_down(0)) slope_gradient(g, x, dy, this->blobs_[0]->mutable_cpu_diff());
  if (propagate_down[0]) {
    // Caffe's form, d ((v > 0) + s (v <= 0)), branch-free: a NaN input gets gradient 0 there and here.
    slope_map<Dtype>(g, this->blobs_[0]->cpu_data(), x, dy, bottom[0]->mutable_cpu_diff(),
                     [](Dtype v, Dtype d, Dtype s) {
                       return neuron::select(v > Dtype(0), d, neuron::select(v <= Dtype(0), s * d, Dtype(0)));
                     });
  }
}

STRATA_INSTANTIATE_CLASS(PReLULayer);
REGISTER_LAYER_CLASS(PReLU);

}  // namespace strata
