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
#include <vector>

#include "gradient_checker.hpp"
#include "strata/device.hpp"
#include "strata/layer_factory.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace gpu_compare {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_build()) GTEST_SKIP() << "this build has no GPU support (no CUDA toolkit at build time)";
    if (gpu_device_count() == 0) {
      GTEST_SKIP() << "no GPU: cudaGetDeviceCount reports none on this machine; these tests run on a GPU machine";
    }
    if (selected_gpu_device() < 0) select_gpu_device(-1);
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
};

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

// Runs the layer forward and backward on the CPU, then a second one set up alike (same weights, same inputs, same
// top gradients, same random seed) on the GPU, and compares everything they computed. Two layers, not one run
// twice: a layer may carry state from one forward to the next (RNN and LSTM without expose_hidden keep their
// last hidden state for the next batch), which would make the GPU pass start where the CPU pass ended.
inline void CompareWithCpu(const LayerCase& c) {
  LayerParameter param;
  ReadProtoFromTextString(c.prototxt, &param);
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
  auto cpu_layer = LayerRegistry<float>::CreateLayer(param);
  cpu_layer->SetUp(bottom, top);
  auto gpu_layer = LayerRegistry<float>::CreateLayer(param);
  gpu_layer->SetUp(bottom, top);

  std::vector<std::vector<float>> x0, p0;
  for (auto* b : bottom) x0.push_back(Copy(b->cpu_data(), b->count()));
  for (auto& p : cpu_layer->blobs()) p0.push_back(Copy(p->cpu_data(), p->count()));
  std::vector<bool> down(bottom.size(), true);
  if (c.label_bottom >= 0) down[c.label_bottom] = false;

  // One pass in the current mode; returns tops, then bottom gradients, then parameter gradients, then the
  // parameters themselves (BatchNorm's forward updates its running statistics there).
  std::vector<std::vector<float>> dy;
  auto run = [&](Layer<float>* layer) {
    for (size_t b = 0; b < bottom.size(); ++b) std::copy(x0[b].begin(), x0[b].end(), bottom[b]->mutable_cpu_data());
    for (size_t i = 0; i < p0.size(); ++i) {
      std::copy(p0[i].begin(), p0[i].end(), layer->blobs()[i]->mutable_cpu_data());
      cpu_set(layer->blobs()[i]->count(), 0.f, layer->blobs()[i]->mutable_cpu_diff());
    }
    layer->Reshape(bottom, top);
    Strata::set_random_seed(42);
    layer->Forward(bottom, top);
    std::vector<std::vector<float>> out;
    for (auto* t : top) out.push_back(Copy(t->cpu_data(), t->count()));
    if (dy.empty()) {
      for (auto* t : top) {
        dy.emplace_back(t->count());
        rng_uniform<float>(t->count(), -1.f, 1.f, dy.back().data());
      }
    }
    for (size_t t = 0; t < top.size(); ++t) std::copy(dy[t].begin(), dy[t].end(), top[t]->mutable_cpu_diff());
    layer->Backward(top, down, bottom);
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (down[b]) out.push_back(Copy(bottom[b]->cpu_diff(), bottom[b]->count()));
    }
    for (auto& p : layer->blobs()) out.push_back(Copy(p->cpu_diff(), p->count()));
    for (auto& p : layer->blobs()) out.push_back(Copy(p->cpu_data(), p->count()));
    return out;
  };
  const auto cpu = run(cpu_layer.get());
  Strata::set_mode(Strata::GPU);
  const auto gpu = run(gpu_layer.get());
  Strata::set_mode(Strata::CPU);
  ASSERT_EQ(cpu.size(), gpu.size());
  const bool cudnn_conv = param.type() == "Convolution" || param.type() == "Deconvolution";
  const double bound = cudnn_conv ? std::max(c.bound, 1e-4) : c.bound;
  for (size_t k = 0; k < cpu.size(); ++k) {
    ASSERT_EQ(cpu[k].size(), gpu[k].size());
    const double err = NormalisedError(gpu[k].data(), cpu[k].data(), static_cast<int>(cpu[k].size()));
    const size_t params = cpu_layer->blobs().size();
    const char* what = k < top.size()                 ? "top"
                       : k + 2 * params < cpu.size() ? "bottom diff"
                       : k + params < cpu.size()     ? "param diff"
                                                     : "param";
    EXPECT_LT(err, bound) << what << " #" << k << " (" << cpu[k].size() << " values)";
    std::printf("[gpu-vs-cpu] %-18s %-12s %-11s #%zu  n=%-7zu normalised error %.3g\n", param.type().c_str(),
                param.name().c_str(), what, k, cpu[k].size(), err);
  }
}

// Finite differences of the GPU forward against the GPU backward, in double (cuDNN and cuBLAS run double too).
// Bottoms are filled uniformly in [lo, hi], then `fill` may overwrite some (labels, indices); only bottom
// `check_bottom` is checked when it is >= 0 (every bottom otherwise), and every parameter blob.
struct GradientCase {
  std::string prototxt;
  std::vector<std::vector<int>> bottoms = {{2, 3, 6, 5}};
  int check_bottom = -1;
  std::function<void(const std::vector<Blob<double>*>&)> fill = nullptr;
  double lo = -1, hi = 1;
  int tops = 1;
  double step = 1e-4, threshold = 1e-6;
};

inline void GpuGradientCheck(const GradientCase& c) {
  LayerParameter param;
  ReadProtoFromTextString(c.prototxt, &param);
  SCOPED_TRACE(param.type() + " " + param.name());
  Strata::set_mode(Strata::GPU);
  std::vector<std::unique_ptr<Blob<double>>> owned;
  std::vector<Blob<double>*> bottom, top;
  Strata::set_random_seed(3);
  for (const auto& shape : c.bottoms) {
    owned.emplace_back(new Blob<double>(shape));
    rng_uniform<double>(owned.back()->count(), c.lo, c.hi, owned.back()->mutable_cpu_data());
    bottom.push_back(owned.back().get());
  }
  if (c.fill) c.fill(bottom);
  for (int t = 0; t < c.tops; ++t) {
    owned.emplace_back(new Blob<double>());
    top.push_back(owned.back().get());
  }
  auto layer = LayerRegistry<double>::CreateLayer(param);
  GradientChecker<double> checker(c.step, c.threshold);
  checker.CheckGradient(layer.get(), bottom, top, c.check_bottom);
  EXPECT_GT(checker.last_num_checked(), 0);
  Strata::set_mode(Strata::CPU);
}

}  // namespace gpu_compare
}  // namespace strata
