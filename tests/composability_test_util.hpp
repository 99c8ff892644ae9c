// The composability matrix's shared parts (tests/test_composability.cpp in one process,
// tests/mpi/test_composability.cpp on several ranks): the features a run turns on, the small net and solver they
// shape, a cell of the matrix, and how two runs are compared.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <ostream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "strata/device.hpp"
#include "strata/memory_format.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace composability_test {

constexpr int kIterations = 10;
constexpr int kBatch = 8;

// Everything a run turns on. The defaults are the product's (fusion and layouts on), the rest off.
struct Features {
  bool fusion = true;
  bool layouts = true;        // blocked activations and parameters in oneDNN's layouts
  bool bf16 = false;
  bool fp16 = false;          // precision: FP16 (float16 on the GPU; float on the CPU)
  bool recompute = false;     // recompute_param { planner: "sqrt" }
  bool free_after_use = false;  // blob_lifetime FREE_AFTER_USE (off: KEEP, Caffe's every blob kept)
  int reversible = 0;         // 0: no block; 1: a block keeping its input (verify); 2: rebuilding it
  int kfac = 0;               // 0: SGD; 1: empirical Fisher; 2: true Fisher
  int batch = kBatch;         // records per iteration (per rank)
  int iter_size = 1;          // the batch split into iter_size passes
  bool clip = false;          // clip_gradients, set to bite
  float clip_norm = 0.05f;    // its threshold
  bool resume = false;        // snapshot half-way, restore in a new solver, train on
  bool dropout = false;
  bool stochastic_pool = false;
  bool loss_scale = false;    // a dynamic loss scale from 2^12 that doubles every 2 iterations (never overflows)
  bool batch_norm = true;     // off where a cell splits the batch: its statistics depend on the split by design
  bool gpu = false;
  // gpu_options().channels_last: which activations are NHWC on the GPU (the default: bfloat16 ones).
  GpuOptions::ChannelsLast channels_last = GpuOptions::ChannelsLast::k16Bit;
  // How the iteration runs on several ranks (tests/mpi/test_composability.cpp): off, the whole batch on one rank.
  enum Engine { kOneRank, kDataParallel, kPipelineSync, kPipelineAsync } engine = kOneRank;
};

inline std::string NetText(const std::string& source, const Features& f) {
  const int batch = f.batch / f.iter_size;
  std::ostringstream s;
  s << "name: 'matrix'\n"
    << "layer { name: 'data' type: 'Data' top: 'data' top: 'label' transform_param { scale: 0.00390625 }\n"
    << "        data_param { source: '" << source << "' batch_size: " << batch << " } }\n"
    << "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
    << "        convolution_param { num_output: 16 kernel_size: 3 pad: 1\n"
    << "          weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.05 } } }\n"
    << "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }\n"
    << "layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1'\n"
    << "        pooling_param { pool: " << (f.stochastic_pool ? "STOCHASTIC" : "MAX") << " kernel_size: 2 stride: 2 } }\n";
  std::string below = "pool1";
  if (f.reversible) {
    // The m-stream coupling: 4 states of 4 channels, three steps of conv + ReLU (absorbed) each.
    s << "layer { name: 'rev' type: 'Reversible' bottom: 'pool1' top: 'rev'\n"
      << "        reversible_param { streams: 4 gamma: 0.5 verify: " << (f.reversible == 1 ? "true" : "false") << "\n";
    for (int t = 0; t < 3; ++t) {
      s << "          step { layer { name: 'rev_s" << t << "' type: 'Convolution' bottom: 'in' top: 't'\n"
        << "            convolution_param { num_output: 4 kernel_size: 3 pad: 1\n"
        << "              weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'constant' value: 0.01 } } }\n"
        << "            layer { name: 'rev_r" << t << "' type: 'ReLU' bottom: 't' top: 't' } }\n";
    }
    s << "        } }\n";
    below = "rev";
  }
  s << "layer { name: 'conv2' type: 'Convolution' bottom: '" << below << "' top: 'conv2'\n"
    << "        convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: " << (f.batch_norm ? "false" : "true")
    << "\n          weight_filler { type: 'gaussian' std: 0.2 } } }\n";
  if (f.batch_norm) {
    s << "layer { name: 'bn2' type: 'BatchNorm' bottom: 'conv2' top: 'conv2'\n"
      << "        param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 } }\n"
      << "layer { name: 'scale2' type: 'Scale' bottom: 'conv2' top: 'conv2' scale_param { bias_term: true } }\n";
  }
  s << "layer { name: 'relu2' type: 'ReLU' bottom: 'conv2' top: 'conv2' }\n"
    << "layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv2' top: 'ip1'\n"
    << "        inner_product_param { num_output: 12 weight_filler { type: 'gaussian' std: 0.1 }\n"
    << "          bias_filler { type: 'constant' value: 0.01 } } }\n"
    << "layer { name: 'relu3' type: 'ReLU' bottom: 'ip1' top: 'ip1' }\n";
  if (f.dropout) s << "layer { name: 'drop' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.3 } }\n";
  s << "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'\n"
    << "        inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }\n";
  return s.str();
}

inline SolverParameter SolverParam(const std::string& source, const std::string& prefix, const Features& f,
                            int iterations) {
  SolverParameter p;
  ReadProtoFromTextString(NetText(source, f), p.mutable_net_param());
  p.set_base_lr(0.05f);
  p.set_momentum(0.9f);
  p.set_weight_decay(0.001f);
  p.set_lr_policy("inv");
  p.set_gamma(0.05f);
  p.set_power(0.75f);
  p.set_max_iter(iterations);
  p.set_iter_size(f.iter_size);
  p.set_random_seed(1701);
  p.set_display(0);
  p.set_snapshot_prefix(prefix);
  p.set_snapshot_after_train(false);
  if (f.bf16) p.set_precision(BF16);
  if (f.fp16) p.set_precision(FP16);
  if (f.recompute) p.mutable_recompute_param()->set_planner("sqrt");
  if (f.free_after_use) p.set_blob_lifetime(SolverParameter::FREE_AFTER_USE);
  if (f.clip) p.set_clip_gradients(f.clip_norm);
  if (f.loss_scale) {
    LossScaleParameter* s = p.mutable_loss_scale();
    s->set_scale(4096);
    s->set_dynamic(true);
    s->set_growth_interval(2);
  }
  if (f.kfac) {
    p.set_type("KFAC");
    KfacParameter* k = p.mutable_kfac_param();
    k->set_fisher(f.kfac == 1 ? KfacParameter::EMPIRICAL : KfacParameter::TRUE_FISHER);
    k->set_damping(0.01f);
    k->set_factor_interval(1);
    k->set_inverse_interval(2);
    k->set_kl_clip(0.01f);
  }
  return p;
}

struct Result {
  std::vector<float> losses;                // one per iteration
  std::vector<std::vector<float>> weights;  // every layer's parameters at the end, statistics included
  std::vector<std::string> names;           // "layer/k" of each
  // Of those, the ones the solver updates (a learning rate above zero): not BatchNorm's statistics, which forward
  // moves whatever the solver does.
  std::vector<std::vector<float>> learned;
  // Whether some blob's values were kept in 16 bits on the device at the end, and some channels-last.
  bool held_16bit = false, held_channels_last = false;
  double loss_scale = 1;  // the optimizer's at the end

  // Takes the weights from `net`, layer by layer.
  void TakeWeights(Net<float>& net) {
    std::set<const Blob<float>*> updated;
    for (size_t p = 0; p < net.learnable_params().size(); ++p) {
      if (net.params_lr()[p] > 0) updated.insert(net.learnable_params()[p]);
    }
    for (const auto& b : net.blobs()) {
      held_16bit = held_16bit || is_16bit(b->data_device_format());
      held_channels_last = held_channels_last || is_channels_last(b->data_device_format());
    }
    for (int i = 0; i < net.num_layers(); ++i) {
      const auto& blobs = net.layers()[i]->blobs();
      for (size_t k = 0; k < blobs.size(); ++k) {
        weights.emplace_back(blobs[k]->cpu_data(), blobs[k]->cpu_data() + blobs[k]->count());
        names.push_back(net.layer_names()[i] + "/" + std::to_string(k));
        if (updated.count(blobs[k].get())) learned.push_back(weights.back());
      }
    }
  }
};

// Sets the process-wide switches a run reads when its nets are built, and puts them back.
class Switches {
 public:
  explicit Switches(const Features& f)
      : fusion_(Net<float>::layer_fusion_enabled()), blocked_(blocked_layouts_enabled()),
        param_(param_layouts_enabled()), channels_last_(gpu_options().channels_last) {
    Net<float>::set_layer_fusion_enabled(f.fusion);
    gpu_options().channels_last = f.channels_last;
    set_blocked_layouts_enabled(f.layouts);
    set_param_layouts_enabled(f.layouts);
    Strata::set_mode(f.gpu ? Strata::GPU : Strata::CPU);
  }
  ~Switches() {
    Net<float>::set_layer_fusion_enabled(fusion_);
    set_blocked_layouts_enabled(blocked_);
    set_param_layouts_enabled(param_);
    gpu_options().channels_last = channels_last_;
    Strata::set_mode(Strata::CPU);
  }

 private:
  bool fusion_, blocked_, param_;
  GpuOptions::ChannelsLast channels_last_;
};

// Each feature: how a cell turns it on or off.
struct Feature {
  std::function<void(Features*, bool)> set;
};

inline const std::map<std::string, Feature>& FeatureTable() {
  static const std::map<std::string, Feature> table = {
      {"fusion", {[](Features* f, bool on) { f->fusion = on; }}},
      {"layouts", {[](Features* f, bool on) { f->layouts = on; }}},
      {"bf16", {[](Features* f, bool on) { f->bf16 = on; }}},
      {"fp16", {[](Features* f, bool on) { f->fp16 = on; }}},
      {"recompute", {[](Features* f, bool on) { f->recompute = on; }}},
      {"free_after_use", {[](Features* f, bool on) { f->free_after_use = on; }}},
      // Off: the same block keeping its input (the reference computes what rebuilding must reproduce).
      {"reversible", {[](Features* f, bool on) { f->reversible = on ? 2 : 1; }}},
      {"kfac_empirical", {[](Features* f, bool on) { f->kfac = on ? 1 : 0; }}},
      {"kfac_true", {[](Features* f, bool on) { f->kfac = on ? 2 : 0; }}},
      // Off: one pass over the whole batch.
      {"iter_size", {[](Features* f, bool on) { f->iter_size = on ? 2 : 1; }}},
      {"clip", {[](Features* f, bool on) { f->clip = on; }}},
      {"resume", {[](Features* f, bool on) { f->resume = on; }}},
      {"dropout", {[](Features* f, bool on) { f->dropout = on; }}},
      {"stochastic_pool", {[](Features* f, bool on) { f->stochastic_pool = on; }}},
      {"loss_scale", {[](Features* f, bool on) { f->loss_scale = on; }}},
      {"gpu", {[](Features* f, bool on) { f->gpu = on; }}},
      // Both runs in bfloat16 on the GPU; off: every activation channels-first (docs/gpu.md, "Channels-last").
      {"gpu_channels_last", {[](Features* f, bool on) {
         f->gpu = f->bf16 = true;
         f->channels_last = on ? GpuOptions::ChannelsLast::k16Bit : GpuOptions::ChannelsLast::kNone;
       }}},
      // Both runs in float on the GPU: channels-last (gpu_channels_last=all) against every activation channels-first.
      {"gpu_channels_last_float", {[](Features* f, bool on) {
         f->gpu = true;
         f->channels_last = on ? GpuOptions::ChannelsLast::kAll : GpuOptions::ChannelsLast::kNone;
       }}},
      {"data_parallel", {[](Features* f, bool on) { f->engine = on ? Features::kDataParallel : Features::kOneRank; }}},
      {"pipeline_sync", {[](Features* f, bool on) { f->engine = on ? Features::kPipelineSync : Features::kOneRank; }}},
      {"pipeline_async", {[](Features* f, bool on) { f->engine = on ? Features::kPipelineAsync : Features::kOneRank; }}},
  };
  return table;
}

// kEqual: the run equals its reference within the bound. kRefused: refused before the first iteration, with a
// message naming both. kTrains: both features change what is computed, so there is no reference run; the pair
// must train (finite losses, weights moved). kNotCovered: the note says why.
enum Outcome { kEqual, kRefused, kTrains, kNotCovered };

struct Cell {
  const char* a;      // the feature the reference turns off
  const char* b;      // the feature on in both runs
  double bound;       // largest relative difference of any parameter or loss (0: bit for bit)
  Outcome outcome = kEqual;
  const char* note = "";  // kRefused: words the message must contain, '|' between; kNotCovered: why
};

inline std::ostream& operator<<(std::ostream& os, const Cell& c) { return os << c.a << " x " << c.b; }

// The features of cell `c`'s run (a_on) or of its reference (feature a off).
inline Features CellFeatures(const Cell& c, bool a_on) {
  Features f;
  // A split batch changes BatchNorm's statistics by design: cells that split it leave BatchNorm out.
  const std::vector<std::string> splits = {"iter_size", "data_parallel", "pipeline_sync", "pipeline_async"};
  for (const std::string& s : splits) f.batch_norm = f.batch_norm && s != c.a && s != c.b;
  FeatureTable().at(c.b).set(&f, true);
  FeatureTable().at(c.a).set(&f, a_on);
  return f;
}

// The words a refusal's message must contain (a refused cell's note, '|' between them).
inline std::vector<std::string> RefusalWords(const Cell& c) {
  std::vector<std::string> words;
  std::istringstream in(c.note);
  for (std::string w; std::getline(in, w, '|');) words.push_back(w);
  return words;
}

// Largest |x - ref| over the largest |ref|, per vector; the worst of them.
inline double RelativeDifference(const std::vector<std::vector<float>>& x, const std::vector<std::vector<float>>& ref) {
  EXPECT_EQ(x.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < ref.size(); ++i) {
    EXPECT_EQ(x[i].size(), ref[i].size());
    double scale = 0, diff = 0;
    for (size_t k = 0; k < x[i].size() && k < ref[i].size(); ++k) {
      scale = std::max(scale, std::fabs(double(ref[i][k])));
      diff = std::max(diff, std::fabs(double(x[i][k]) - ref[i][k]));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

}  // namespace composability_test
}  // namespace strata
