// The GPU comparison harness shared by the GPU test files: a fixture that skips without a GPU, and
// CompareWithCpu, which runs one layer forward and backward on the CPU and then on the GPU (same weights, inputs,
// top gradients and random seed) and compares everything it computed; GpuGradientCheck runs finite differences
// of the GPU forward against the GPU backward, in double.
//
// The comparison is the normalised error ||gpu - cpu|| / ||cpu||, per top, bottom gradient and parameter
// gradient. The bound is 1e-5 in float for the exact algorithms (TF32 stays off in these tests): the two sides
// differ only in the order of their sums and in the last bits of exp/tanh. Convolution's (and Deconvolution's)
// bound is 1e-4: cuDNN may pick a Winograd or FFT algorithm, exact in exact arithmetic but with larger float
// rounding.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_skip.hpp"
#include "gradient_checker.hpp"
#include "strata/device.hpp"
#include "strata/layer_factory.hpp"
#include "strata/memory_format.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace gpu_compare {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoGpu(); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override { Strata::set_mode(Strata::CPU); }
};

struct LayerCase {
  std::string prototxt;                   // the LayerParameter, text format
  std::vector<std::vector<int>> bottoms;  // shapes
  int tops = 1;
  int label_bottom = -1;  // this bottom holds class labels in [0, label_classes)
  int label_classes = 0;
  bool in_place = false;  // top 0 is bottom 0
  double bound = 1e-5;
  double lo = -1, hi = 1;  // the other bottoms are uniform in [lo, hi]
  // Inputs, parameters and top gradients rounded to this 16-bit type first: the float reference of a layer that
  // computes in it (precision: BF16 or FP16 on the GPU), which then differs from it by the rounding of what it
  // stores. kOwn: nothing rounded.
  ElementType round_to = ElementType::kOwn;
  // On the GPU, the bottoms and top gradients of 4 axes handed to the layer channels-last (as a convolution before
  // it leaves them), in round_to's type (float with kOwn), and top 0 required to come out in that
  // format when top_channels_last, and then each bottom's gradient too (backward runs in forward's order).
  bool channels_last = false;
  bool top_channels_last = false;
  // With channels_last, which bottoms are handed channels-last (the others channels-first); empty: all of them.
  std::vector<bool> bottoms_channels_last = {};
  // Top 0's value dropped between forward and backward, as blob lifetimes do to a value no backward reads.
  bool release_top = false;
  // Overwrites the layer's parameters before both runs (BatchNorm's running statistics, which start at zero).
  std::function<void(std::vector<std::vector<float>>*)> fill_params = nullptr;
};

// gpu_options().channels_last set for a scope, and put back.
class ChannelsLastOption {
 public:
  explicit ChannelsLastOption(GpuOptions::ChannelsLast c) : was_(gpu_options().channels_last) {
    gpu_options().channels_last = c;
  }
  ~ChannelsLastOption() { gpu_options().channels_last = was_; }

 private:
  GpuOptions::ChannelsLast was_;
};

// Puts a blob's value (or its gradient) on the device in `format`, as a layer before would leave it.
inline void HandIn(const Blob<float>& blob, bool diff, DeviceFormat format) {
  if (is_16bit(format)) {
    diff ? blob.gpu_diff_16bit(format) : blob.gpu_data_16bit(format);
  } else {
    diff ? blob.gpu_diff_in(format) : blob.gpu_data_in(format);
  }
}

// Rounds every value to the 16-bit type `t` (nothing for kOwn).
inline void RoundTo(ElementType t, std::vector<float>* v) {
  for (float& x : *v) {
    if (t == ElementType::kBf16) x = from_bf16(to_bf16(x));
    if (t == ElementType::kFp16) x = from_fp16(to_fp16(x));
  }
}

inline double NormalisedError(const float* got, const float* want, int n) {
  double diff = 0, ref = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    ref += double(want[i]) * want[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

inline std::vector<float> Copy(const float* p, int n) { return std::vector<float>(p, p + n); }

// Runs one layer forward and backward as `want` describes it on the device `want_gpu` names, then a second one
// as `got` describes it (the same layer type with another engine, or the same one) on `got_gpu`'s, with the same
// weights, inputs, top gradients and random seed, and compares everything they computed within c.bound (1e-4 at
// least for a convolution on the GPU). Two layers, not one run twice: a layer may carry state from one forward to
// the next (RNN and LSTM without expose_hidden keep their last hidden state for the next batch), which would make
// the second pass start where the first ended.
inline void CompareLayers(const LayerCase& c, const LayerParameter& want, bool want_gpu, const LayerParameter& got,
                          bool got_gpu) {
  const LayerParameter& param = got;
  SCOPED_TRACE(param.type() + " " + param.name());
  Strata::set_mode(Strata::CPU);
  Strata::set_random_seed(1701);
  std::vector<std::unique_ptr<Blob<float>>> bottom_blobs, top_blobs;
  std::vector<Blob<float>*> bottom, top;
  for (size_t b = 0; b < c.bottoms.size(); ++b) {
    bottom_blobs.emplace_back(new Blob<float>(c.bottoms[b]));
    Blob<float>* blob = bottom_blobs.back().get();
    float* x = blob->mutable_cpu_data();
    if (static_cast<int>(b) == c.label_bottom) {
      std::uniform_int_distribution<int> dist(0, c.label_classes - 1);
      for (int i = 0; i < blob->count(); ++i) x[i] = static_cast<float>(dist(Strata::rng()));
    } else {
      rng_uniform<float>(blob->count(), static_cast<float>(c.lo), static_cast<float>(c.hi), x);
    }
    bottom.push_back(blob);
  }
  for (int t = 0; t < c.tops; ++t) {
    if (t == 0 && c.in_place) {
      top.push_back(bottom[0]);
      continue;
    }
    top_blobs.emplace_back(new Blob<float>());
    top.push_back(top_blobs.back().get());
  }
  auto want_layer = LayerRegistry<float>::CreateLayer(want);
  want_layer->SetUp(bottom, top);
  auto got_layer = LayerRegistry<float>::CreateLayer(got);
  got_layer->SetUp(bottom, top);
  if (got_gpu && got.precision() != FP32) {
    Strata::set_mode(Strata::GPU);
    EXPECT_TRUE(got_layer->ComputesIn16Bit()) << "the layer computes in float: nothing of 16 bits' is compared";
    Strata::set_mode(Strata::CPU);
  }

  std::vector<std::vector<float>> x0, p0;
  for (auto* b : bottom) x0.push_back(Copy(b->cpu_data(), b->count()));
  for (auto& p : want_layer->blobs()) p0.push_back(Copy(p->cpu_data(), p->count()));
  if (c.fill_params) c.fill_params(&p0);
  for (auto& v : x0) RoundTo(c.round_to, &v);
  for (auto& v : p0) RoundTo(c.round_to, &v);
  std::vector<bool> down(bottom.size(), true);
  if (c.label_bottom >= 0) down[c.label_bottom] = false;

  // One pass in the current mode; returns tops, then bottom gradients, then parameter gradients, then the
  // parameters themselves (BatchNorm's forward updates its running statistics there).
  std::vector<std::vector<float>> dy;
  auto run = [&](Layer<float>* layer) {
    for (size_t b = 0; b < bottom.size(); ++b) std::copy(x0[b].begin(), x0[b].end(), bottom[b]->mutable_cpu_data());
    const bool channels_last = c.channels_last && Strata::mode() == Strata::GPU;
    const DeviceFormat last_format = device_format_for(c.round_to, true);
    for (size_t b = 0; b < bottom.size(); ++b) {
      const bool last = c.bottoms_channels_last.empty() || c.bottoms_channels_last[b];
      if (channels_last && bottom[b]->can_channels_last()) {
        HandIn(*bottom[b], /*diff=*/false, device_format_for(c.round_to, last));
      }
    }
    for (size_t i = 0; i < p0.size(); ++i) {
      std::copy(p0[i].begin(), p0[i].end(), layer->blobs()[i]->mutable_cpu_data());
      // Not zero: a layer adds its parameters' gradients to what is there (iter_size, shared weights rely on it).
      cpu_set(layer->blobs()[i]->count(), 0.25f, layer->blobs()[i]->mutable_cpu_diff());
    }
    layer->Reshape(bottom, top);
    Strata::set_random_seed(42);
    layer->Forward(bottom, top);
    if (channels_last && c.top_channels_last) {
      EXPECT_EQ(top[0]->data_device_format(), last_format) << "top 0 left channels-last";
    }
    std::vector<std::vector<float>> out;
    for (auto* t : top) out.push_back(Copy(t->cpu_data(), t->count()));
    if (dy.empty()) {
      for (auto* t : top) {
        dy.emplace_back(t->count());
        rng_uniform<float>(t->count(), -1.f, 1.f, dy.back().data());
        RoundTo(c.round_to, &dy.back());
      }
    }
    for (size_t t = 0; t < top.size(); ++t) {
      std::copy(dy[t].begin(), dy[t].end(), top[t]->mutable_cpu_diff());
      if (channels_last && top[t]->can_channels_last()) HandIn(*top[t], /*diff=*/true, last_format);
    }
    if (c.release_top) {
      EXPECT_NE(top[0], bottom[0]) << "a value computed in place is its bottom's";
      EXPECT_FALSE(layer->BackwardNeedsTopData()) << "the layer reads the value dropped";
      top[0]->data()->release();
    }
    layer->Backward(top, down, bottom);
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (channels_last && c.top_channels_last && down[b] && bottom[b]->can_channels_last()) {
        EXPECT_EQ(bottom[b]->diff_device_format(), last_format) << "bottom " << b << "'s gradient";
      }
      if (down[b]) out.push_back(Copy(bottom[b]->cpu_diff(), bottom[b]->count()));
    }
    for (auto& p : layer->blobs()) out.push_back(Copy(p->cpu_diff(), p->count()));
    for (auto& p : layer->blobs()) out.push_back(Copy(p->cpu_data(), p->count()));
    return out;
  };
  Strata::set_mode(want_gpu ? Strata::GPU : Strata::CPU);
  const auto wanted = run(want_layer.get());
  Strata::set_mode(got_gpu ? Strata::GPU : Strata::CPU);
  const auto gotten = run(got_layer.get());
  Strata::set_mode(Strata::CPU);
  ASSERT_EQ(wanted.size(), gotten.size());
  const bool cudnn_conv = got_gpu && (param.type() == "Convolution" || param.type() == "Deconvolution");
  const double bound = cudnn_conv ? std::max(c.bound, 1e-4) : c.bound;
  for (size_t k = 0; k < wanted.size(); ++k) {
    ASSERT_EQ(wanted[k].size(), gotten[k].size());
    const double err = NormalisedError(gotten[k].data(), wanted[k].data(), static_cast<int>(wanted[k].size()));
    const size_t params = want_layer->blobs().size();
    const char* what = k < top.size()                 ? "top"
                       : k + 2 * params < wanted.size() ? "bottom diff"
                       : k + params < wanted.size()     ? "param diff"
                                                     : "param";
    EXPECT_LT(err, bound) << what << " #" << k << " (" << wanted[k].size() << " values)";
    std::printf("[%s-vs-%s] %-18s %-12s %-11s #%zu  n=%-7zu normalised error %.3g\n", got_gpu ? "gpu" : "cpu",
                want_gpu ? "gpu" : "cpu", param.type().c_str(), param.name().c_str(), what, k, wanted[k].size(), err);
  }
}

// The layer `c` describes on the GPU against the same layer on the CPU.
inline void CompareWithCpu(const LayerCase& c) {
  LayerParameter param;
  ReadProtoFromTextString(c.prototxt, &param);
  CompareLayers(c, param, false, param, true);
}

// Finite differences of the GPU forward against the GPU backward, in double (cuDNN and cuBLAS run double too).
// Bottoms are filled uniformly in [lo, hi], then `fill` may overwrite some (labels, indices); only bottom
// `check_bottom` is checked when it is >= 0 (every bottom otherwise), and every parameter blob.
struct GradientCase {
  std::string prototxt;
  std::vector<std::vector<int>> bottoms = {{2, 3, 6, 5}};
  int check_bottom = -1;
  std::function<void(const std::vector<Blob<double>*>&)> fill = nullptr;  // double checks only
  double lo = -1, hi = 1;
  int tops = 1;
  double step = 1e-4, threshold = 1e-6;
  double kink = 0, kink_range = -1;  // values within kink_range of kink are not perturbed (GradientChecker)
};

// The check on the device `gpu` names, in Dtype: double wherever the layer computes in double (an engine that
// computes only in float, such as oneDNN, is checked in float with a coarser step and bound).
template <typename Dtype>
void CheckLayerGradient(const GradientCase& c, const LayerParameter& param, bool gpu, double step, double threshold) {
  SCOPED_TRACE(param.type() + " " + param.name());
  Strata::set_mode(gpu ? Strata::GPU : Strata::CPU);
  std::vector<std::unique_ptr<Blob<Dtype>>> owned;
  std::vector<Blob<Dtype>*> bottom, top;
  Strata::set_random_seed(3);
  for (const auto& shape : c.bottoms) {
    owned.emplace_back(new Blob<Dtype>(shape));
    rng_uniform<Dtype>(owned.back()->count(), Dtype(c.lo), Dtype(c.hi), owned.back()->mutable_cpu_data());
    bottom.push_back(owned.back().get());
  }
  if constexpr (std::is_same_v<Dtype, double>) {
    if (c.fill) c.fill(bottom);
  } else {
    ASSERT_FALSE(c.fill) << "a fill is written for double blobs";
  }
  for (int t = 0; t < c.tops; ++t) {
    owned.emplace_back(new Blob<Dtype>());
    top.push_back(owned.back().get());
  }
  auto layer = LayerRegistry<Dtype>::CreateLayer(param);
  GradientChecker<Dtype> checker(Dtype(step), Dtype(threshold), 1701, Dtype(c.kink), Dtype(c.kink_range));
  checker.CheckGradient(layer.get(), bottom, top, c.check_bottom);
  EXPECT_GT(checker.last_num_checked(), 0);
  Strata::set_mode(Strata::CPU);
}

inline void GpuGradientCheck(const GradientCase& c) {
  LayerParameter param;
  ReadProtoFromTextString(c.prototxt, &param);
  CheckLayerGradient<double>(c, param, true, c.step, c.threshold);
}

}  // namespace gpu_compare
}  // namespace strata
