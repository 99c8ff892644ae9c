// The Caffe element-wise layers (AbsVal, BNLL, Clip, ELU, Exp, Log, Power, PReLU, Swish, Threshold) on the GPU:
// forward and backward against the CPU on random data, and finite differences of the GPU forward against the
// GPU backward in double. They skip without a GPU (see gpu_layer_compare.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_layer_compare.hpp"

namespace strata {
namespace {

using gpu_compare::CompareWithCpu;
using gpu_compare::GpuTest;
using gpu_compare::LayerCase;

std::vector<LayerCase> NeuronCases() {
  const std::vector<int> s = {2, 3, 5, 4};
  return {
      {R"(name: "absval" type: "AbsVal")", {s}},
      {R"(name: "bnll" type: "BNLL")", {s}},
      {R"(name: "bnll_in_place" type: "BNLL")", {s}, 1, -1, 0, true},
      {R"(name: "clip" type: "Clip" clip_param { min: -0.4 max: 0.6 })", {s}},
      {R"(name: "elu" type: "ELU" elu_param { alpha: 0.7 })", {s}},
      {R"(name: "elu_in_place" type: "ELU")", {s}, 1, -1, 0, true},
      {R"(name: "elu_negative_alpha" type: "ELU" elu_param { alpha: -0.5 })", {s}},
      {R"(name: "exp" type: "Exp")", {s}},
      {R"(name: "exp_base2" type: "Exp" exp_param { base: 2 scale: 1.5 shift: -0.5 })", {s}, 1, -1, 0, true},
      {R"(name: "log" type: "Log" log_param { shift: 2 })", {s}},
      {R"(name: "log10" type: "Log" log_param { base: 10 scale: 0.5 shift: 1.5 })", {s}},
      {R"(name: "power1" type: "Power" power_param { scale: -2 shift: 0.5 })", {s}, 1, -1, 0, true},
      {R"(name: "power2" type: "Power" power_param { power: 2 scale: 1.5 shift: 0.3 })", {s}},
      {R"(name: "power_general" type: "Power" power_param { power: 1.7 scale: 0.8 shift: 2 })", {s}},
      {R"(name: "power_constant" type: "Power" power_param { power: 3 scale: 0 shift: 1.5 })", {s}},
      {R"(name: "prelu" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })", {s}},
      {R"(name: "prelu_in_place" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })", {s},
       1, -1, 0, true},
      {R"(name: "prelu_2d" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })", {{6, 7}}},
      {R"(name: "prelu_shared" type: "PReLU" prelu_param { channel_shared: true })", {s}},
      {R"(name: "prelu_shared_in_place" type: "PReLU" prelu_param { channel_shared: true })", {s}, 1, -1, 0, true},
      // Enough values per channel for channel_reduce to split each over several blocks.
      {R"(name: "prelu_large" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })",
       {{4, 3, 64, 65}}},
      {R"(name: "swish" type: "Swish" swish_param { beta: 1.3 })", {s}},
      {R"(name: "swish_in_place" type: "Swish")", {s}, 1, -1, 0, true},
      {R"(name: "threshold" type: "Threshold" threshold_param { threshold: 0.1 })", {s}},
      {R"(name: "threshold_in_place" type: "Threshold")", {s}, 1, -1, 0, true},
  };
}

TEST_F(GpuTest, NeuronLayersMatchCpu) {
  for (const auto& c : NeuronCases()) CompareWithCpu(c);
}

// Moves values within 1e-2 of a kink to 2e-2 from it (same side): the finite-difference step is 1e-4.
std::function<void(const std::vector<Blob<double>*>&)> AwayFrom(std::vector<double> kinks) {
  return [kinks](const std::vector<Blob<double>*>& b) {
    double* v = b[0]->mutable_cpu_data();
    for (int i = 0; i < b[0]->count(); ++i) {
      for (double k : kinks) {
        if (std::fabs(v[i] - k) < 1e-2) v[i] = k + (v[i] < k ? -2e-2 : 2e-2);
      }
    }
  };
}

TEST_F(GpuTest, NeuronGradientChecks) {
  using gpu_compare::GradientCase;
  auto with_kinks = [](const char* text, std::vector<double> kinks, std::vector<std::vector<int>> bottoms = {}) {
    GradientCase c{text};
    c.fill = AwayFrom(std::move(kinks));
    if (!bottoms.empty()) c.bottoms = bottoms;
    return c;
  };
  const std::vector<GradientCase> cases = {
      with_kinks(R"(name: "absval" type: "AbsVal")", {0}),
      GradientCase{R"(name: "bnll" type: "BNLL")"},
      with_kinks(R"(name: "clip" type: "Clip" clip_param { min: -0.4 max: 0.6 })", {-0.4, 0.6}),
      with_kinks(R"(name: "elu" type: "ELU" elu_param { alpha: 0.7 })", {0}),
      with_kinks(R"(name: "elu_negative_alpha" type: "ELU" elu_param { alpha: -0.5 })", {0}),
      GradientCase{R"(name: "exp" type: "Exp" exp_param { base: 2 scale: 1.5 shift: -0.5 })"},
      GradientCase{R"(name: "log" type: "Log" log_param { base: 10 scale: 0.5 shift: 1.5 })"},
      GradientCase{R"(name: "power2" type: "Power" power_param { power: 2 scale: 1.5 shift: 0.3 })"},
      GradientCase{R"(name: "power_general" type: "Power" power_param { power: 1.7 scale: 0.8 shift: 2 })"},
      GradientCase{R"(name: "power1" type: "Power" power_param { scale: -2 shift: 0.5 })"},
      with_kinks(R"(name: "prelu" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })", {0}),
      with_kinks(R"(name: "prelu_2d" type: "PReLU" prelu_param { filler { type: "uniform" min: -1 max: 1 } })", {0},
                 {{6, 7}}),
      with_kinks(R"(name: "prelu_shared" type: "PReLU" prelu_param { channel_shared: true
                    filler { type: "constant" value: -0.3 } })",
                 {0}),
      GradientCase{R"(name: "swish" type: "Swish" swish_param { beta: 1.3 })"},
      with_kinks(R"(name: "threshold" type: "Threshold" threshold_param { threshold: 0.1 })", {0.1}),
  };
  for (const auto& c : cases) gpu_compare::GpuGradientCheck(c);
}

}  // namespace
}  // namespace strata
