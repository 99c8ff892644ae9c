// Caffe's layer catalogue, all of it: every type BVLC Caffe registers is registered here too (but Python, which
// runs Python code, and WindowData, R-CNN's window files, both left out on purpose), and every type that computes
// something is built from its prototxt text and gradient-checked against finite differences, every bottom that
// takes a gradient and every parameter. The data layers (Data, DummyData, ImageData, HDF5Data, MemoryData, Input)
// have their own tests with files; here they need only be known.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// What BVLC Caffe's master registers (REGISTER_LAYER_CLASS / REGISTER_LAYER_CREATOR in src/caffe/layers).
const std::vector<std::string> kCaffeTypes = {
    "AbsVal", "Accuracy", "ArgMax", "BNLL", "BatchNorm", "BatchReindex", "Bias", "Clip", "Concat",
    "ContrastiveLoss", "Convolution", "Crop", "Data", "Deconvolution", "Dropout", "DummyData", "ELU", "Eltwise",
    "Embed", "EuclideanLoss", "Exp", "Filter", "Flatten", "HDF5Data", "HDF5Output", "HingeLoss", "Im2col",
    "ImageData", "InfogainLoss", "InnerProduct", "Input", "LRN", "LSTM", "LSTMUnit", "Log", "MVN", "MemoryData",
    "MultinomialLogisticLoss", "PReLU", "Parameter", "Pooling", "Power", "Python", "RNN", "ReLU", "Reduction",
    "Reshape", "SPP", "Scale", "Sigmoid", "SigmoidCrossEntropyLoss", "Silence", "Slice", "Softmax",
    "SoftmaxWithLoss", "Split", "Swish", "TanH", "Threshold", "Tile", "WindowData"};

// Not registered by libstrata itself: WindowData is left out on purpose (docs/caffe.md says why); Python comes
// from its own module, loaded when a net first names it (strata/layer_modules.hpp, tested in tests/python).
const std::set<std::string> kLeftOut = {"Python", "WindowData"};
// Not written yet (docs/caffe.md, "Layers"): the test insists they are absent, so that whoever adds one moves it
// out of this list and into the gradient checks below. None left.
const std::set<std::string> kNotYet = {};

TEST(LayerCatalogue, EveryCaffeTypeIsKnown) {
  std::vector<std::string> missing, listed_but_present;
  for (const auto& type : kCaffeTypes) {
    const bool known = LayerRegistry<double>::Has(type);
    EXPECT_EQ(known, LayerRegistry<float>::Has(type)) << type;
    if (kLeftOut.count(type) || kNotYet.count(type)) {
      if (known) listed_but_present.push_back(type);
    } else if (!known) {
      missing.push_back(type);
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& t : v) s += " " + t;
    return s;
  };
  EXPECT_TRUE(missing.empty()) << "Caffe layer types Strata does not know:" << join(missing);
  EXPECT_TRUE(listed_but_present.empty()) << "registered, so take them out of kNotYet:" << join(listed_but_present);
}

// One gradient check: the layer's prototxt, its bottoms' shapes, the range they are drawn from, and which bottoms
// hold labels or indices (filled by `fill`, no gradient).
struct Case {
  using Fill = std::function<void(const std::vector<Blob<double>*>&)>;
  Case(std::string prototxt, std::vector<std::vector<int>> bottoms, int tops = 1, double lo = -1, double hi = 1,
       std::set<int> no_gradient = {}, Fill fill = nullptr)
      : prototxt(std::move(prototxt)), bottoms(std::move(bottoms)), tops(tops), lo(lo), hi(hi),
        no_gradient(std::move(no_gradient)), fill(std::move(fill)) {}
  std::string prototxt;
  std::vector<std::vector<int>> bottoms;
  int tops;
  double lo, hi;
  std::set<int> no_gradient;
  Fill fill;
};

void Labels(Blob<double>* b, int classes) {
  for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = (i * 7 + 3) % classes;
}

std::vector<Case> Cases() {
  auto labels = [](int bottom, int classes) {
    return [=](const std::vector<Blob<double>*>& b) { Labels(b[bottom], classes); };
  };
  return {
      {"type: 'AbsVal'", {{2, 3, 4}}, 1, 0.1, 1},
      {"type: 'BNLL'", {{2, 3, 4}}},
      {"type: 'BatchNorm' phase: TRAIN", {{4, 3, 2, 2}}},
      {"type: 'BatchReindex'", {{4, 3}, {5}}, 1, -1, 1, {1}, labels(1, 4)},
      {"type: 'Bias' bias_param { filler { type: 'gaussian' } }", {{2, 3, 4}}},
      {"type: 'Clip' clip_param { min: -2 max: 2 }", {{2, 3, 4}}},
      {"type: 'Concat'", {{2, 3, 2}, {2, 1, 2}}},
      {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 legacy_version: true }", {{4, 3}, {4, 3}, {4, 1, 1}}, 1, -1, 1, {2},
       labels(2, 2)},
      {"type: 'Convolution' convolution_param { num_output: 2 kernel_size: 2 weight_filler { type: 'gaussian' } }",
       {{2, 2, 3, 3}}},
      {"type: 'Crop' crop_param { axis: 2 offset: 1 }", {{2, 2, 4, 4}, {2, 2, 2, 2}}, 1, -1, 1, {1}},
      {"type: 'Deconvolution' convolution_param { num_output: 2 kernel_size: 2 stride: 2 "
       "weight_filler { type: 'gaussian' } }",
       {{2, 2, 2, 2}}},
      {"type: 'Dropout' phase: TRAIN", {{2, 3, 4}}},
      {"type: 'ELU'", {{2, 3, 4}}, 1, 0.05, 1},
      {"type: 'Eltwise' eltwise_param { operation: PROD }", {{2, 3}, {2, 3}}},
      {"type: 'Embed' embed_param { num_output: 3 input_dim: 5 weight_filler { type: 'gaussian' } }", {{4}}, 1, -1,
       1, {0}, labels(0, 5)},
      {"type: 'EuclideanLoss'", {{3, 4}, {3, 4}}},
      {"type: 'Exp'", {{2, 3, 4}}},
      {"type: 'Filter'", {{4, 3}, {4}}, 1, -1, 1, {1}, labels(1, 2)},
      {"type: 'Flatten'", {{2, 3, 2}}},
      {"type: 'HingeLoss'", {{4, 5}, {4}}, 1, -1, 1, {1}, labels(1, 5)},
      // Recurrent layers: x (T x N x input), cont (T x N, 0/1, no gradient); LSTMUnit: c_prev, gates, cont.
      {"type: 'LSTM' recurrent_param { num_output: 2 weight_filler { type: 'gaussian' } "
       "bias_filler { type: 'gaussian' } }", {{3, 2, 3}, {3, 2}}, 1, -1, 1, {1}, labels(1, 2)},
      {"type: 'LSTMUnit'", {{1, 2, 3}, {1, 2, 12}, {1, 2}}, 2, -1, 1, {2}, labels(2, 2)},
      {"type: 'RNN' recurrent_param { num_output: 2 weight_filler { type: 'gaussian' } "
       "bias_filler { type: 'gaussian' } }", {{3, 2, 3}, {3, 2}}, 1, -1, 1, {1}, labels(1, 2)},
      {"type: 'Im2col' convolution_param { kernel_size: 2 }", {{2, 2, 3, 3}}},
      {"type: 'InfogainLoss'", {{4, 3}, {4}, {3, 3}}, 1, 0.1, 1, {1, 2}, labels(1, 3)},
      {"type: 'InnerProduct' inner_product_param { num_output: 3 weight_filler { type: 'gaussian' } }", {{2, 4}}},
      {"type: 'LRN'", {{2, 5, 2, 2}}},
      {"type: 'Log'", {{2, 3, 4}}, 1, 0.5, 2},
      {"type: 'MVN'", {{2, 3, 2, 2}}},
      {"type: 'MultinomialLogisticLoss'", {{4, 3}, {4}}, 1, 0.1, 1, {1}, labels(1, 3)},
      {"type: 'PReLU'", {{2, 3, 4}}, 1, 0.05, 1},
      {"type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }", {}},
      {"type: 'Pooling' pooling_param { pool: AVE kernel_size: 2 }", {{2, 2, 4, 4}}},
      {"type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }", {{2, 3, 4}}},
      {"type: 'ReLU' relu_param { negative_slope: 0.1 }", {{2, 3, 4}}, 1, 0.05, 1},
      {"type: 'Reduction' reduction_param { operation: SUMSQ axis: 1 }", {{2, 3, 4}}},
      {"type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }", {{2, 3, 4}}},
      {"type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }", {{2, 2, 4, 4}}},
      {"type: 'Scale' scale_param { bias_term: true }", {{2, 3, 4}}},
      {"type: 'Sigmoid'", {{2, 3, 4}}},
      {"type: 'SigmoidCrossEntropyLoss'", {{3, 4}, {3, 4}}, 1, -1, 1, {1}, labels(1, 2)},
      {"type: 'Slice' slice_param { slice_point: 1 }", {{2, 3, 2}}, 2},
      {"type: 'Softmax'", {{2, 5}}},
      {"type: 'SoftmaxWithLoss'", {{4, 5}, {4}}, 1, -1, 1, {1}, labels(1, 5)},
      {"type: 'Split'", {{2, 3}}, 2},
      {"type: 'Swish'", {{2, 3, 4}}},
      {"type: 'TanH'", {{2, 3, 4}}},
      {"type: 'Tile' tile_param { axis: 1 tiles: 3 }", {{2, 2, 2}}},
  };
}

TEST(LayerCatalogue, EveryComputingTypeGradientChecksFromItsPrototxt) {
  std::set<std::string> checked;
  for (const Case& c : Cases()) {
    LayerParameter param;
    ReadProtoFromTextString("name: 'layer' " + c.prototxt, &param);
    SCOPED_TRACE(c.prototxt);
    if (!LayerRegistry<double>::Has(param.type())) {
      ADD_FAILURE() << param.type() << " is not registered";
      continue;
    }
    std::vector<std::unique_ptr<Blob<double>>> owned;
    std::vector<Blob<double>*> bottom, top;
    for (size_t b = 0; b < c.bottoms.size(); ++b) {
      owned.emplace_back(new Blob<double>(c.bottoms[b]));
      FillUniform(owned.back().get(), c.lo, c.hi, 11 + static_cast<unsigned>(b));
      bottom.push_back(owned.back().get());
    }
    if (c.fill) c.fill(bottom);
    for (int t = 0; t < c.tops; ++t) {
      owned.emplace_back(new Blob<double>());
      top.push_back(owned.back().get());
    }
    auto layer = LayerRegistry<double>::CreateLayer(param);
    GradientChecker<double> checker(1e-4, 1e-5);
    if (c.no_gradient.empty()) {
      checker.CheckGradient(layer.get(), bottom, top);
    } else {
      // Each bottom that takes a gradient on its own (with the parameters).
      bool any = false;
      for (size_t b = 0; b < bottom.size(); ++b) {
        if (c.no_gradient.count(static_cast<int>(b))) continue;
        checker.CheckGradient(layer.get(), bottom, top, static_cast<int>(b));
        any = true;
      }
      // Only parameters take a gradient (Embed): a bottom index past the last checks the parameters alone.
      if (!any) checker.CheckGradient(layer.get(), bottom, top, static_cast<int>(bottom.size()));
    }
    EXPECT_GT(checker.last_num_checked(), 0) << param.type();
    checked.insert(param.type());
  }
  // Every type that computes a gradient is in the table.
  std::vector<std::string> unchecked;
  const std::set<std::string> no_gradient_types = {"Accuracy", "ArgMax", "Data", "DummyData", "HDF5Data",
                                                   "HDF5Output", "ImageData", "Input", "MemoryData", "Silence",
                                                   "Threshold"};
  for (const auto& type : kCaffeTypes) {
    if (!kLeftOut.count(type) && !kNotYet.count(type) && !no_gradient_types.count(type) && !checked.count(type)) {
      unchecked.push_back(type);
    }
  }
  std::string list;
  for (const auto& t : unchecked) list += " " + t;
  EXPECT_TRUE(unchecked.empty()) << "types without a catalogue gradient check:" << list;
}

}  // namespace
}  // namespace strata
