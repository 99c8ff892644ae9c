// Helpers of the Reversible layer's tests (test_reversible_layer.cpp, test_reversible_coupling.cpp): a stack of
// blocks between a stem convolution and a softmax loss, its inputs and gradients, and the same stack run once
// rebuilding its blocks' inputs and once keeping them.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace reversible_test {

// Input "data" (2 x 2 x hw x hw) and "label" -> conv "stem" to `channels` channels -> `blocks` blocks -> ip ->
// softmax loss. block(b) writes block b's layer, which reads blob "x<b>" and writes "x<b+1>".
inline std::string StackOfBlocks(int blocks, int channels, int hw, const std::function<std::string(int)>& block) {
  std::ostringstream s;
  s << "name: \"stack\"\n"
    << "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\"\n"
    << "  input_param { shape { dim: 2 dim: 2 dim: " << hw << " dim: " << hw << " } shape { dim: 2 } } }\n"
    << "layer { name: \"stem\" type: \"Convolution\" bottom: \"data\" top: \"x0\"\n"
    << "  convolution_param { num_output: " << channels << " kernel_size: 3 pad: 1\n"
    << "    weight_filler { type: \"gaussian\" std: 0.3 } } }\n";
  for (int b = 0; b < blocks; ++b) s << block(b);
  s << "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"x" << blocks << "\" top: \"score\"\n"
    << "  inner_product_param { num_output: 3 weight_filler { type: \"gaussian\" std: 0.1 } } }\n"
    << "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"score\" bottom: \"label\" top: \"loss\" }\n";
  return s.str();
}

inline NetParameter ParseTrainNet(const std::string& text) {
  NetParameter p;
  ReadProtoFromTextString(text, &p, "reversible_test.prototxt");
  p.mutable_state()->set_phase(TRAIN);
  return p;
}

template <typename Dtype>
void FillInputs(Net<Dtype>* net) {
  FillUniform(net->blob_by_name("data").get(), Dtype(-1), Dtype(1), 3);
  Dtype* label = net->blob_by_name("label")->mutable_cpu_data();
  label[0] = 1;
  label[1] = 2;
}

// Gradient of every parameter, flattened.
template <typename Dtype>
std::vector<Dtype> Gradients(Net<Dtype>& net) {
  std::vector<Dtype> g;
  for (Blob<Dtype>* p : net.learnable_params()) g.insert(g.end(), p->cpu_diff(), p->cpu_diff() + p->count());
  return g;
}

// One training step of a stack whose blocks rebuild their inputs and of the same stack keeping them (verify), in
// float: net_text(verify) writes it; both nets are built after seeding the random engine with `build_seed`, and
// each step starts from `run_seed` when it is >= 0.
struct RebuiltAndKept {
  std::unique_ptr<Net<float>> rebuilt, kept;
  double gradient_difference = 0;  // |g_rebuilt - g_kept| / |g_kept| over all parameter gradients
};

inline RebuiltAndKept CompareRebuiltWithKept(const std::function<std::string(bool)>& net_text, unsigned build_seed,
                                             int run_seed = -1) {
  RebuiltAndKept r;
  Strata::set_random_seed(build_seed);
  r.rebuilt = std::make_unique<Net<float>>(ParseTrainNet(net_text(false)));
  Strata::set_random_seed(build_seed);
  r.kept = std::make_unique<Net<float>>(ParseTrainNet(net_text(true)));
  FillInputs(r.rebuilt.get());
  FillInputs(r.kept.get());
  for (Net<float>* net : {r.rebuilt.get(), r.kept.get()}) {
    if (run_seed >= 0) Strata::set_random_seed(run_seed);
    net->ClearParamDiffs();
    net->ForwardBackward();
  }
  const std::vector<float> a = Gradients(*r.rebuilt), b = Gradients(*r.kept);
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  EXPECT_GT(norm, 0);
  r.gradient_difference = std::sqrt(diff / norm);
  return r;
}

}  // namespace reversible_test
}  // namespace strata
