// The Reversible layer on the GPU (its coupling's kernels, coupling_math.cu; its steps' layers run their own GPU
// code): forward, inverse and gradients against the CPU for m = 2, 3, 4 streams, gamma 1 and 0.5, fewer and more
// steps than streams, a stack whose blocks rebuild their inputs, and finite differences in double. They skip
// without a GPU (gpu_layer_compare.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"
#include "reversible_test_util.hpp"
#include "strata/layers/reversible_layer.hpp"
#include "strata/net.hpp"

namespace strata {
namespace {

using gpu_compare::GpuTest;
using gpu_compare::NormalisedError;

// A Reversible layer of `streams` states of `state_channels` channels each and `steps` steps, each a 3x3
// convolution of the window to one state followed by `neuron`.
std::string Block(const std::string& name, int streams, int state_channels, int steps, double gamma,
                  const std::string& neuron, bool verify = false) {
  std::ostringstream s;
  s << "name: '" << name << "' type: 'Reversible'\n"
    << "reversible_param { streams: " << streams << " gamma: " << gamma << " verify: " << (verify ? "true" : "false")
    << "\n";
  for (int t = 0; t < steps; ++t) {
    s << "  step { layer { name: '" << name << "_c" << t << "' type: 'Convolution' bottom: 'in' top: 't'\n"
      << "    convolution_param { num_output: " << state_channels << " kernel_size: 3 pad: 1\n"
      << "      weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'uniform' min: -0.2 max: 0.2 } } }\n"
      << "    layer { name: '" << name << "_n" << t << "' type: '" << neuron << "' bottom: 't' top: 't' } }\n";
  }
  s << "}";
  return s.str();
}

struct Shape {
  int streams, steps;
  double gamma;
};
// RevNet's block; gamma 0.5; fewer steps than streams (input states that are output states); more steps than
// streams (states between input and output); four streams.
const Shape kShapes[] = {{2, 2, 1.0}, {2, 2, 0.5}, {3, 2, 1.0}, {3, 5, 0.5}, {4, 3, 0.5}};

TEST_F(GpuTest, ReversibleLayersMatchCpu) {
  for (const Shape& sh : kShapes) {
    for (bool verify : {false, true}) {
      gpu_compare::LayerCase c{Block("rev", sh.streams, 2, sh.steps, sh.gamma, "ReLU", verify),
                               {{3, 2 * sh.streams, 5, 4}}};
      c.bound = 1e-4;  // the steps' convolutions are cuDNN's (gpu_layer_compare.hpp)
      gpu_compare::CompareWithCpu(c);
    }
  }
}

TEST_F(GpuTest, ReversibleGradientChecks) {
  for (const Shape& sh : kShapes) {
    gpu_compare::GradientCase c{Block("rev", sh.streams, 1, sh.steps, sh.gamma, "TanH"), {{2, sh.streams, 3, 3}}};
    gpu_compare::GpuGradientCheck(c);
  }
}

// A stack of blocks in a net: the Net drops each block's input after forward, so backward rebuilds it on the
// device through the inverse. The loss and every parameter gradient equal the CPU's; in verify mode the rebuilt
// input equals the kept one to float rounding.
TEST_F(GpuTest, ReversibleStackRebuildsItsInputsAsOnTheCpu) {
  for (const Shape& sh : kShapes) {
    for (bool verify : {false, true}) {
      const int channels = 2 * sh.streams;
      const std::string text = reversible_test::StackOfBlocks(3, channels, 6, [&](int b) {
        const std::string name = "rev" + std::to_string(b);
        return "layer { " + Block(name, sh.streams, 2, sh.steps, sh.gamma, "ReLU", verify) + " bottom: 'x" +
               std::to_string(b) + "' top: 'x" + std::to_string(b + 1) + "' }\n";
      });
      SCOPED_TRACE(text);
      std::vector<float> loss;
      std::vector<std::vector<float>> gradients;
      for (auto mode : {Strata::CPU, Strata::GPU}) {
        Strata::set_mode(mode);
        Strata::set_random_seed(11);
        Net<float> net(reversible_test::ParseTrainNet(text));
        reversible_test::FillInputs(&net);
        net.ClearParamDiffs();
        loss.push_back(net.ForwardBackward());
        gradients.push_back(reversible_test::Gradients(net));
        if (verify) {
          for (int b = 0; b < 3; ++b) {
            auto* block = dynamic_cast<ReversibleLayer<float>*>(net.layer_by_name("rev" + std::to_string(b)).get());
            ASSERT_NE(block, nullptr);
            EXPECT_LT(block->reconstruction_error(), 1e-5f) << "block " << b << " in mode " << mode;
          }
        }
      }
      Strata::set_mode(Strata::CPU);
      EXPECT_NEAR(loss[1], loss[0], 1e-5 * std::fabs(loss[0]));
      ASSERT_EQ(gradients[0].size(), gradients[1].size());
      const double err = NormalisedError(gradients[1].data(), gradients[0].data(), static_cast<int>(gradients[0].size()));
      EXPECT_LT(err, 1e-4) << "parameter gradients, GPU against CPU";
      std::printf("[gpu-vs-cpu] Reversible stack m=%d k=%d gamma=%g verify=%d normalised error %.3g\n", sh.streams,
                  sh.steps, sh.gamma, verify, err);
    }
  }
}

}  // namespace
}  // namespace strata
