// The recurrent layers (LSTMUnit, LSTM, RNN) on the GPU: forward and backward against the CPU, and finite-difference
// gradient checks of the GPU passes in double. They skip without a GPU (gpu_layer_compare.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"

namespace strata {
namespace {

using gpu_compare::GpuTest;

// cont: sequence starts inside the batch (0 where (t + n) % 3 == 1), 1 elsewhere.
void FillCont(Blob<double>* cont) {
  const int N = cont->shape(1);
  for (int k = 0; k < cont->count(); ++k) cont->mutable_cpu_data()[k] = ((k / N + k % N) % 3 == 1) ? 0 : 1;
}

std::string Recurrent(const std::string& type, bool expose) {
  return "name: '" + type + (expose ? "_exposed" : "") + "' type: '" + type + "' recurrent_param { num_output: 5 " +
         (expose ? "expose_hidden: true " : "") +
         "weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'uniform' min: -0.5 max: 0.5 } }";
}

TEST_F(GpuTest, RecurrentLayersMatchCpu) {
  // cont is a "label" bottom: values in {0, 1}, and no gradient asked for it.
  gpu_compare::LayerCase unit{"name: 'unit' type: 'LSTMUnit'", {{1, 6, 7}, {1, 6, 28}, {1, 6}}, 2};
  unit.label_bottom = 2;
  unit.label_classes = 2;
  gpu_compare::CompareWithCpu(unit);
  for (const std::string type : {"LSTM", "RNN"}) {
    const std::vector<int> state = {1, 4, 5};
    const int states = type == "LSTM" ? 2 : 1;
    // x, cont; then with x_static; then with x_static and the exposed states.
    gpu_compare::LayerCase plain{Recurrent(type, false), {{6, 4, 3, 2}, {6, 4}}, 1};
    gpu_compare::LayerCase with_static{Recurrent(type, false), {{6, 4, 3, 2}, {6, 4}, {4, 3}}, 1};
    gpu_compare::LayerCase exposed{Recurrent(type, true), {{6, 4, 3, 2}, {6, 4}, {4, 3}}, 1 + states};
    exposed.bottoms.insert(exposed.bottoms.end(), states, state);
    for (gpu_compare::LayerCase* c : {&plain, &with_static, &exposed}) {
      c->label_bottom = 1;
      c->label_classes = 2;
      gpu_compare::CompareWithCpu(*c);
    }
  }
}

TEST_F(GpuTest, RecurrentGradientChecks) {
  // LSTMUnit: c_prev and x (not cont).
  for (int bottom : {0, 1}) {
    gpu_compare::GradientCase unit{"name: 'unit' type: 'LSTMUnit'", {{1, 3, 2}, {1, 3, 8}, {1, 3}}, bottom};
    unit.tops = 2;
    unit.fill = [](const std::vector<Blob<double>*>& b) {
      b[2]->mutable_cpu_data()[0] = 1;
      b[2]->mutable_cpu_data()[1] = 0;
      b[2]->mutable_cpu_data()[2] = 1;
    };
    gpu_compare::GpuGradientCheck(unit);
  }
  // LSTM and RNN with x_static and the exposed states: every bottom but cont (bottom 1), with the parameters.
  for (const std::string type : {"LSTM", "RNN"}) {
    const int states = type == "LSTM" ? 2 : 1;
    std::vector<std::vector<int>> shapes = {{3, 2, 3}, {3, 2}, {2, 2}};
    shapes.insert(shapes.end(), states, {1, 2, 5});
    for (int bottom = 0; bottom < static_cast<int>(shapes.size()); ++bottom) {
      if (bottom == 1) continue;
      gpu_compare::GradientCase c{Recurrent(type, true), shapes, bottom};
      c.tops = 1 + states;
      c.fill = [](const std::vector<Blob<double>*>& b) { FillCont(b[1]); };
      gpu_compare::GpuGradientCheck(c);
    }
    // Without expose_hidden (the carried state is zero at setup).
    gpu_compare::GradientCase carried{Recurrent(type, false), {{3, 2, 3}, {3, 2}}, 0};
    carried.fill = [](const std::vector<Blob<double>*>& b) { FillCont(b[1]); };
    gpu_compare::GpuGradientCheck(carried);
  }
}

}  // namespace
}  // namespace strata
