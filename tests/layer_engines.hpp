// Each layer's tests over the backends that run it: a layer's test file declares typed tests over the backends
// below, so one file holds everything about one layer (docs/architecture.md, Layout, tests/). A backend is an
// engine (CAFFE, ONEDNN, CUDNN) on a device; the GPU backend skips without a GPU, and runs on a GPU machine.
//
// Three checks per layer and backend:
// - ExpectMatchesCaffeOnCpu: forward, bottom and parameter gradients against the CAFFE engine on the CPU, the
//   reference, within the normalised error ||got - want|| / ||want|| < 1e-5 (1e-4 for cuDNN's convolutions,
//   which may pick Winograd or FFT: gpu_layer_compare.hpp);
// - CheckGradient: finite differences of the backend's own forward (in double, or in float with a step and bound
//   of 1e-2 where the engine computes only in float, as oneDNN does);
// - ExpectFusionChangesNothing: a small net with layer fusion on and off (Layer::Absorb), equal within a bound.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_layer_compare.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

// Declares a layer's typed suites: `<LAYER>On`, over every backend in ALL, and `<LAYER>BesideCaffe`, over those
// compared against the reference (CAFFE on the CPU, which is not compared against itself).
#define STRATA_BACKEND_SUITES(LAYER, ALL, BESIDE_CAFFE)                                   \
  template <typename B>                                                                 \
  class LAYER##On : public ::strata::layer_engines::BackendTest<B> {};                  \
  TYPED_TEST_SUITE(LAYER##On, ALL, ::strata::layer_engines::BackendName);               \
  template <typename B>                                                                 \
  class LAYER##BesideCaffe : public ::strata::layer_engines::BackendTest<B> {};         \
  TYPED_TEST_SUITE(LAYER##BesideCaffe, BESIDE_CAFFE, ::strata::layer_engines::BackendName)

namespace strata {
namespace layer_engines {

// The fillers of the weighted layers' cases: weights of std 0.3, biases in [-1, 1].
inline const std::string kFillers =
    R"(weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "uniform" min: -1 max: 1 })";

// `engine`: the value a layer's `engine` field takes on this backend where its enum has it (CAFFE otherwise).
struct CaffeCpu {
  static constexpr const char* engine = "CAFFE";
  static constexpr bool gpu = false;
  static constexpr bool float_only = false;
};
struct OneDnnCpu {
  static constexpr const char* engine = "ONEDNN";
  static constexpr bool gpu = false;
  static constexpr bool float_only = true;  // oneDNN computes in float; a double layer runs the CAFFE engine
};
// cuDNN where the layer has it, the layer's own CUDA kernels otherwise.
struct Gpu {
  static constexpr const char* engine = "CUDNN";
  static constexpr bool gpu = true;
  static constexpr bool float_only = false;
};

struct BackendName {
  template <typename B>
  static std::string GetName(int) {
    if (std::is_same_v<B, CaffeCpu>) return "CaffeCpu";
    if (std::is_same_v<B, OneDnnCpu>) return "OneDnnCpu";
    return "Gpu";
  }
};

// Layers with a oneDNN engine, and what is compared against their reference (CAFFE on the CPU).
using WithOneDnn = ::testing::Types<CaffeCpu, OneDnnCpu, Gpu>;
using WithOneDnnBesideCaffe = ::testing::Types<OneDnnCpu, Gpu>;
// Layers with no oneDNN engine.
using CpuAndGpu = ::testing::Types<CaffeCpu, Gpu>;
using GpuBesideCaffe = ::testing::Types<Gpu>;

// The parameter message that carries a layer type's `engine` field.
inline const char* EngineMessage(const std::string& type) {
  static const std::map<std::string, const char*> messages = {
      {"Convolution", "convolution_param"}, {"Deconvolution", "convolution_param"},
      {"InnerProduct", "inner_product_param"}, {"LRN", "lrn_param"},
      {"Pooling", "pooling_param"}, {"ReLU", "relu_param"},
      {"Sigmoid", "sigmoid_param"}, {"Softmax", "softmax_param"},
      {"SoftmaxWithLoss", "softmax_param"}, {"SPP", "spp_param"},
      {"TanH", "tanh_param"}};
  const auto it = messages.find(type);
  return it == messages.end() ? nullptr : it->second;
}

// Sets `layer`'s engine to `preferred` where its enum has that value, else to CAFFE; layer types without an engine
// are left as they are.
inline void SetEngine(LayerParameter* layer, const std::string& preferred) {
  const char* message = EngineMessage(layer->type());
  if (message == nullptr) return;
  const google::protobuf::FieldDescriptor* field = layer->GetDescriptor()->FindFieldByName(message);
  ASSERT_NE(field, nullptr) << message;
  google::protobuf::Message* param = layer->GetReflection()->MutableMessage(layer, field);
  const google::protobuf::FieldDescriptor* engine = param->GetDescriptor()->FindFieldByName("engine");
  ASSERT_NE(engine, nullptr) << message << " has no engine";
  const google::protobuf::EnumValueDescriptor* value = engine->enum_type()->FindValueByName(preferred);
  if (value == nullptr) value = engine->enum_type()->FindValueByName("CAFFE");
  param->GetReflection()->SetEnum(param, engine, value);
}

inline void SetEngines(NetParameter* net, const std::string& preferred) {
  for (LayerParameter& layer : *net->mutable_layer()) SetEngine(&layer, preferred);
}

template <typename B>
LayerParameter OnBackend(const std::string& text) {
  LayerParameter param;
  ReadProtoFromTextString(text, &param);
  SetEngine(&param, B::engine);
  return param;
}

template <typename B>
class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (B::gpu) {
      if (const std::string why = WhyNoGpu(); !why.empty()) GTEST_SKIP() << why;
    }
  }
  void TearDown() override { Strata::set_mode(Strata::CPU); }
};

template <typename B>
void ExpectMatchesCaffeOnCpu(const gpu_compare::LayerCase& c) {
  gpu_compare::CompareLayers(c, OnBackend<CaffeCpu>(c.prototxt), false, OnBackend<B>(c.prototxt), B::gpu);
}

template <typename B>
void CheckGradient(const gpu_compare::GradientCase& c) {
  const LayerParameter param = OnBackend<B>(c.prototxt);
  if constexpr (B::float_only) {
    gpu_compare::CheckLayerGradient<float>(c, param, B::gpu, 1e-2, 1e-2);
  } else {
    gpu_compare::CheckLayerGradient<double>(c, param, B::gpu, c.step, c.threshold);
  }
}

// Everything one forward and backward of a net computed: its outputs, the input "x"'s gradient, the parameters'
// gradients; and the layers another absorbed.
struct NetPass {
  std::vector<std::vector<float>> values;
  std::vector<std::string> absorbed;
};

// `net_text` on backend B with layer fusion `fuse`, in the TRAIN phase: an input blob "x" of random values, the
// weights its fillers draw from one seed, one forward and one backward.
template <typename B>
NetPass RunNet(const std::string& net_text, bool fuse) {
  NetParameter param;
  ReadProtoFromTextString(net_text, &param);
  param.set_force_backward(true);
  param.mutable_state()->set_phase(TRAIN);  // a training pass (BatchNorm computes its batch's statistics)
  SetEngines(&param, B::engine);
  const bool before = Net<float>::layer_fusion_enabled();
  Net<float>::set_layer_fusion_enabled(fuse);
  Strata::set_mode(B::gpu ? Strata::GPU : Strata::CPU);
  Strata::set_random_seed(1701);
  Net<float> net(param);
  Net<float>::set_layer_fusion_enabled(before);
  Blob<float>* x = net.blob_by_name("x").get();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = u(rng);
  net.Forward();
  net.Backward();
  Strata::set_mode(Strata::CPU);
  NetPass pass;
  for (const Blob<float>* out : net.output_blobs()) {
    pass.values.emplace_back(out->cpu_data(), out->cpu_data() + out->count());
  }
  pass.values.emplace_back(x->cpu_diff(), x->cpu_diff() + x->count());
  for (const Blob<float>* p : net.learnable_params()) {
    pass.values.emplace_back(p->cpu_diff(), p->cpu_diff() + p->count());
  }
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (net.layers()[i]->absorbed()) pass.absorbed.push_back(net.layer_names()[i]);
  }
  return pass;
}

// The net with fusion on against the same net with fusion off: every output, the input's gradient and every
// parameter gradient within `bound` (normalised error). Returns the layers the fused net absorbed, for the caller
// to check that fusion took place where the backend fuses.
template <typename B>
std::vector<std::string> ExpectFusionChangesNothing(const std::string& net_text, double bound) {
  const NetPass fused = RunNet<B>(net_text, true), apart = RunNet<B>(net_text, false);
  EXPECT_TRUE(apart.absorbed.empty());
  EXPECT_EQ(fused.values.size(), apart.values.size());
  for (size_t k = 0; k < fused.values.size() && k < apart.values.size(); ++k) {
    EXPECT_EQ(fused.values[k].size(), apart.values[k].size()) << "#" << k;
    if (fused.values[k].size() != apart.values[k].size()) continue;
    const double err = gpu_compare::NormalisedError(fused.values[k].data(), apart.values[k].data(),
                                                    static_cast<int>(apart.values[k].size()));
    EXPECT_LE(err, bound) << "value #" << k << " (outputs, then x's gradient, then the parameters' gradients)";
  }
  return fused.absorbed;
}

}  // namespace layer_engines
}  // namespace strata
