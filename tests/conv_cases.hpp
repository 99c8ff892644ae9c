// Convolution windows for the tests that sweep shapes: random ones (groups, strides, padding, dilation,
// rectangular windows, 1x1) and the models' own, as Convolution or Deconvolution parameters.
#pragma once

#include <google/protobuf/text_format.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu_layer_compare.hpp"
#include "layer_engines.hpp"
#include "strata/parallel.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {
namespace conv_cases {

// Uniform integers in [lo, hi] from a seeded stream (the random shapes).
struct Picker {
  std::mt19937 rng;
  int operator()(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
};

struct ConvCase {
  int num, channels, height, width, num_output, group, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
      dilation_h, dilation_w;
  bool bias;
  // A Deconvolution with this convolution_param instead: channels, height and width are its input's.
  bool deconv = false;
};

inline std::ostream& operator<<(std::ostream& os, const ConvCase& c) {
  return os << "N" << c.num << " C" << c.channels << " " << c.height << "x" << c.width << " O" << c.num_output
            << " G" << c.group << " k" << c.kernel_h << "x" << c.kernel_w << " s" << c.stride_h << "x"
            << c.stride_w << " p" << c.pad_h << "x" << c.pad_w << " d" << c.dilation_h << "x" << c.dilation_w
            << (c.bias ? " bias" : " no bias") << (c.deconv ? " deconvolution" : "");
}

inline LayerParameter ConvParam(const ConvCase& c, ConvolutionParameter::Engine engine) {
  LayerParameter p;
  p.set_name("conv");
  p.set_type(c.deconv ? "Deconvolution" : "Convolution");
  ConvolutionParameter* cp = p.mutable_convolution_param();
  cp->set_num_output(c.num_output);
  cp->set_group(c.group);
  cp->set_kernel_h(c.kernel_h);
  cp->set_kernel_w(c.kernel_w);
  cp->set_stride_h(c.stride_h);
  cp->set_stride_w(c.stride_w);
  cp->set_pad_h(c.pad_h);
  cp->set_pad_w(c.pad_w);
  if (c.dilation_h != 1 || c.dilation_w != 1) {
    cp->add_dilation(c.dilation_h);
    cp->add_dilation(c.dilation_w);
  }
  cp->set_bias_term(c.bias);
  cp->mutable_weight_filler()->set_type("gaussian");
  cp->mutable_bias_filler()->set_type("uniform");
  cp->set_engine(engine);
  return p;
}

// Random shapes that still fit the window: groups, strides, padding, dilation, rectangular windows, 1x1.
inline std::vector<ConvCase> RandomConvCases(int count, unsigned seed) {
  Picker pick{std::mt19937(seed)};
  std::vector<ConvCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    ConvCase c{};
    c.group = pick(1, 3);
    c.channels = c.group * pick(1, 6);
    c.num_output = c.group * pick(1, 6);
    c.num = pick(1, 5);
    c.kernel_h = pick(1, 5);
    c.kernel_w = pick(1, 5);
    c.stride_h = pick(1, 3);
    c.stride_w = pick(1, 3);
    c.dilation_h = pick(1, 2);
    c.dilation_w = pick(1, 2);
    c.pad_h = pick(0, c.kernel_h / 2 + 1);
    c.pad_w = pick(0, c.kernel_w / 2 + 1);
    c.height = pick(1, 17);
    c.width = pick(1, 17);
    c.bias = pick(0, 3) != 0;
    if (c.height + 2 * c.pad_h < c.dilation_h * (c.kernel_h - 1) + 1) continue;
    if (c.width + 2 * c.pad_w < c.dilation_w * (c.kernel_w - 1) + 1) continue;
    cases.push_back(c);
  }
  // Shapes of the models' own layers, where the kernels oneDNN picks differ from the small ones above.
  cases.push_back({2, 3, 32, 32, 32, 1, 5, 5, 1, 1, 2, 2, 1, 1, true});     // cifar10_quick conv1
  cases.push_back({2, 48, 13, 13, 128, 2, 3, 3, 1, 1, 1, 1, 1, 1, true});   // AlexNet conv4-like, 2 groups
  cases.push_back({2, 64, 14, 14, 256, 1, 1, 1, 1, 1, 0, 0, 1, 1, false});  // ResNet 1x1
  cases.push_back({1, 3, 35, 35, 16, 1, 7, 7, 2, 2, 3, 3, 1, 1, true});     // ResNet conv1-like, stride 2
  // Channel counts not in blocks of 16, which run on NHWC activations (onednn_convolution.cpp): LeNet's conv2,
  // an output of 20 after an input of 32, and groups of 24 -> 20 with stride and dilation (where oneDNN may have
  // no optimised NHWC kernel, and the layer goes back to the blocked layouts).
  cases.push_back({2, 20, 12, 12, 50, 1, 5, 5, 1, 1, 0, 0, 1, 1, true});
  cases.push_back({1, 32, 9, 9, 20, 1, 3, 3, 1, 1, 1, 1, 1, 1, true});
  cases.push_back({2, 48, 11, 11, 40, 2, 3, 3, 2, 2, 1, 1, 2, 2, false});
  return cases;
}

// The same random windows as deconvolutions, those that leave an output (its size is
// stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad); the channel counts of 16 and more are FCN's
// up-sampling ones (group = channels, and a 2x one of 32 -> 16).
inline std::vector<ConvCase> RandomDeconvCases(int count, unsigned seed) {
  std::vector<ConvCase> cases;
  for (ConvCase c : RandomConvCases(count, seed)) {
    c.deconv = true;
    const bool has_output =
        c.stride_h * (c.height - 1) + c.dilation_h * (c.kernel_h - 1) + 1 - 2 * c.pad_h > 0 &&
        c.stride_w * (c.width - 1) + c.dilation_w * (c.kernel_w - 1) + 1 - 2 * c.pad_w > 0;
    if (has_output) cases.push_back(c);
  }
  cases.push_back({2, 16, 7, 7, 16, 16, 4, 4, 2, 2, 1, 1, 1, 1, false, true});
  cases.push_back({2, 32, 6, 5, 16, 1, 2, 2, 2, 2, 0, 0, 1, 1, true, true});
  return cases;
}

// The case as a layer to compare (gpu_layer_compare.hpp), its engine left to the caller (layer_engines.hpp).
inline gpu_compare::LayerCase AsLayerCase(const ConvCase& c) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(ConvParam(c, ConvolutionParameter::DEFAULT), &text);
  return {text, {{c.num, c.channels, c.height, c.width}}};
}

// Backend B against CAFFE on the CPU on `count` windows of `cases` (RandomConvCases or RandomDeconvCases), at 1
// and 2 compute threads (drawn from seed + threads).
template <typename B>
void ExpectWindowsMatchCaffeOnCpu(std::vector<ConvCase> (*cases)(int, unsigned), int count, unsigned seed) {
  const int saved = compute_threads();
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    for (const ConvCase& c : cases(count, seed + threads)) {
      SCOPED_TRACE(c);
      layer_engines::ExpectMatchesCaffeOnCpu<B>(AsLayerCase(c));
    }
  }
  set_compute_threads(saved);
}

}  // namespace conv_cases
}  // namespace strata
