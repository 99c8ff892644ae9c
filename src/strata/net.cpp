#include "strata/net.hpp"

#include <algorithm>
#include <set>
#include <type_traits>

#include "strata/layer_factory.hpp"
#include "strata/layer_modules.hpp"
#include "strata/memory_format.hpp"
#include "strata/setting_checks.hpp"
#include "strata/util/flag_parsing.hpp"
#include "strata/util/insert_splits.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {
int& fusion_flag() {
  static int flag = EnvSwitchOn("STRATA_FUSE_LAYERS") ? 1 : 0;
  return flag;
}
}  // namespace

template <typename Dtype>
bool Net<Dtype>::layer_fusion_enabled() {
  return fusion_flag() != 0;
}

template <typename Dtype>
void Net<Dtype>::set_layer_fusion_enabled(bool enabled) {
  fusion_flag() = enabled ? 1 : 0;
}

namespace {

// Prefixes an error from inside a layer with the layer's identity, unless it already names it.
[[noreturn]] void rethrow_for_layer(const Error& e, const LayerParameter& lp) {
  const std::string what = e.what();
  if (what.rfind("layer '", 0) == 0) throw e;
  throw Error("layer '" + lp.name() + "' (" + lp.type() + "): " + what);
}

// Caffe's legacy net inputs (input: / input_shape: / input_dim:) become one Input layer at the front.
void UpgradeLegacyInputs(NetParameter* param) {
  if (param->input_size() == 0) return;
  LayerParameter input;
  input.set_name("input");
  input.set_type("Input");
  const bool has_shape = param->input_shape_size() > 0;
  const bool has_dim = param->input_dim_size() > 0;
  STRATA_REQUIRE(!has_shape || param->input_shape_size() == param->input_size())
      << "net '" << param->name() << "': give one input_shape per input";
  STRATA_REQUIRE(!has_dim || param->input_dim_size() == 4 * param->input_size())
      << "net '" << param->name() << "': give four input_dim values per input";
  STRATA_REQUIRE(has_shape || has_dim) << "net '" << param->name() << "': inputs need input_shape or input_dim";
  for (int i = 0; i < param->input_size(); ++i) {
    input.add_top(param->input(i));
    BlobShape* shape = input.mutable_input_param()->add_shape();
    if (has_shape) {
      *shape = param->input_shape(i);
    } else {
      for (int d = 0; d < 4; ++d) shape->add_dim(param->input_dim(4 * i + d));
    }
  }
  NetParameter upgraded(*param);
  upgraded.clear_input();
  upgraded.clear_input_shape();
  upgraded.clear_input_dim();
  upgraded.clear_layer();
  *upgraded.add_layer() = input;
  for (const auto& l : param->layer()) *upgraded.add_layer() = l;
  param->Swap(&upgraded);
}

}  // namespace

template <typename Dtype>
Net<Dtype>::Net(const NetParameter& param, const DataShard& shard) {
  Init(param, shard);
}

template <typename Dtype>
Net<Dtype>::Net(const std::string& filename, Phase phase, int level, const std::vector<std::string>* stages) {
  NetParameter param;
  ReadNetParamsFromTextFile(filename, &param);
  param.mutable_state()->set_phase(phase);
  param.mutable_state()->set_level(level);
  if (stages) {
    param.mutable_state()->clear_stage();
    for (const auto& s : *stages) param.mutable_state()->add_stage(s);
  }
  Init(param, DataShard());
}

template <typename Dtype>
bool Net<Dtype>::StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer_name) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  const auto& stages = state.stage();
  for (const auto& s : rule.stage()) {
    if (std::find(stages.begin(), stages.end(), s) == stages.end()) return false;
  }
  for (const auto& s : rule.not_stage()) {
    if (std::find(stages.begin(), stages.end(), s) != stages.end()) return false;
  }
  return true;
}

template <typename Dtype>
void Net<Dtype>::FilterNet(const NetParameter& param, NetParameter* filtered) {
  const NetState& state = param.state();
  filtered->CopyFrom(param);
  filtered->clear_layer();
  for (const auto& layer : param.layer()) {
    STRATA_REQUIRE(layer.include_size() == 0 || layer.exclude_size() == 0)
        << "layer '" << layer.name() << "' has both include and exclude rules; use one";
    // No include rules: included unless an exclude rule matches. Include rules: included if one matches.
    bool keep = layer.include_size() == 0;
    for (const auto& rule : layer.exclude()) {
      if (StateMeetsRule(state, rule, layer.name())) keep = false;
    }
    for (const auto& rule : layer.include()) {
      if (StateMeetsRule(state, rule, layer.name())) keep = true;
    }
    if (keep) *filtered->add_layer() = layer;
  }
}

template <typename Dtype>
void Net<Dtype>::Init(const NetParameter& in_param, const DataShard& shard) {
  NetParameter upgraded(in_param);
  UpgradeV1Net(&upgraded);
  UpgradeLegacyInputs(&upgraded);
  NetParameter filtered;
  FilterNet(upgraded, &filtered);
  NetParameter param;
  InsertSplits(filtered, &param);

  name_ = param.name();
  phase_ = param.state().phase();
  std::map<std::string, int> available;  // blob name -> id, for blobs not yet consumed
  const int num_layers = param.layer_size();
  // Nothing to run would "train" with loss 0 and "score" nothing: say so before any work.
  STRATA_REQUIRE(num_layers > 0) << "net '" << name_ << "' has no layers in phase "
                                 << (phase_ == TRAIN ? "TRAIN" : "TEST")
                                 << (upgraded.layer_size() ? " (every layer is excluded by its include/exclude rules)"
                                                           : "");
  bottom_vecs_.resize(num_layers);
  top_vecs_.resize(num_layers);
  bottom_id_vecs_.resize(num_layers);
  top_id_vecs_.resize(num_layers);
  bottom_need_backward_.resize(num_layers);
  param_id_vecs_.resize(num_layers);

  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    LayerParameter* lp = param.mutable_layer(layer_id);
    if (!lp->has_phase()) lp->set_phase(phase_);
    if (!lp->has_precision() && param.has_precision()) lp->set_precision(param.precision());
    STRATA_REQUIRE(lp->propagate_down_size() == 0 || lp->propagate_down_size() == lp->bottom_size())
        << "layer '" << lp->name() << "': propagate_down must be given for all " << lp->bottom_size()
        << " bottoms or none";
    try {
      RequireFiniteFields(*lp, "layer '" + lp->name() + "' (" + lp->type() + ")");
      if (!LayerRegistry<Dtype>::Has(lp->type())) LoadLayerModule(lp->type());
      layers_.push_back(LayerRegistry<Dtype>::CreateLayer(*lp));
    } catch (const Error& e) {
      rethrow_for_layer(e, *lp);
    }
    layer_names_.push_back(lp->name());
    layer_names_index_[lp->name()] = layer_id;
    Layer<Dtype>& layer = *layers_.back();

    bool need_backward = false;
    for (int b = 0; b < lp->bottom_size(); ++b) {
      const int blob_id = AppendBottom(param, layer_id, b, &available);
      need_backward |= blob_need_backward_[blob_id];
    }
    for (int t = 0; t < lp->top_size(); ++t) AppendTop(param, layer_id, t, &available);
    // Layers that want more tops than the prototxt names get anonymous ones (e.g. an unused second output).
    if (layer.AutoTopBlobs()) {
      const int needed = std::max(layer.MinTopBlobs(), layer.ExactNumTopBlobs());
      for (int t = lp->top_size(); t < needed; ++t) AppendTop(param, layer_id, -1, &available);
    }

    try {
      layer.set_data_shard(shard);
      layer.SetUp(bottom_vecs_[layer_id], top_vecs_[layer_id]);
    } catch (const Error& e) {
      rethrow_for_layer(e, *lp);
    }
    // An empty top (a zero dimension in an Input shape, a slice of nothing) has no memory behind it, and the
    // layers below it would fail on it as a broken invariant (a CHECK on its missing data); refuse it here.
    for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
      const Blob<Dtype>& top = *top_vecs_[layer_id][t];
      STRATA_REQUIRE(top.count() > 0)
          << "layer '" << lp->name() << "' (" << lp->type() << ") makes top '"
          << blob_names_[top_id_vecs_[layer_id][t]] << "' of shape " << top.shape_string()
          << ", with no elements; every dimension must be positive";
    }
    for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
      const int top_blob = top_id_vecs_[layer_id][t];
      if (blob_loss_weights_.size() <= static_cast<size_t>(top_blob)) blob_loss_weights_.resize(top_blob + 1, 0);
      blob_loss_weights_[top_blob] = layer.loss(static_cast<int>(t));
    }

    // Parameters: the layer's own param specs (it may have added some in LayerSetUp, e.g. BatchNorm).
    const LayerParameter& final_lp = layer.layer_param();
    const int num_param_blobs = static_cast<int>(layer.blobs().size());
    STRATA_REQUIRE(final_lp.param_size() <= num_param_blobs)
        << "layer '" << lp->name() << "' (" << lp->type() << ") has " << num_param_blobs
        << " parameter blob(s) but " << final_lp.param_size() << " param specs";
    for (int p = 0; p < num_param_blobs; ++p) {
      const bool learns = p >= final_lp.param_size() || final_lp.param(p).lr_mult() != 0;
      need_backward |= learns;
      layer.set_param_propagate_down(p, learns);
      AppendParam(param, layer_id, p);
    }
    layer_need_backward_.push_back(need_backward);
    if (need_backward) {
      for (int top_blob : top_id_vecs_[layer_id]) blob_need_backward_[top_blob] = true;
    }
  }

  // Walk backward to prune computation that reaches no loss, or whose bottoms need no gradient.
  std::set<std::string> blobs_under_loss(param.external_gradient().begin(), param.external_gradient().end());
  std::set<std::string> blobs_skip_backprop;
  for (int layer_id = num_layers - 1; layer_id >= 0; --layer_id) {
    bool contributes_loss = false;
    bool skip_propagate_down = true;
    for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
      const std::string& blob_name = blob_names_[top_id_vecs_[layer_id][t]];
      if (layers_[layer_id]->loss(static_cast<int>(t)) || blobs_under_loss.count(blob_name)) {
        contributes_loss = true;
      }
      if (!blobs_skip_backprop.count(blob_name)) skip_propagate_down = false;
    }
    if (layer_need_backward_[layer_id] && skip_propagate_down) {
      layer_need_backward_[layer_id] = false;
      std::fill(bottom_need_backward_[layer_id].begin(), bottom_need_backward_[layer_id].end(), false);
    }
    if (!contributes_loss) layer_need_backward_[layer_id] = false;
    for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
      const std::string& blob_name = blob_names_[bottom_id_vecs_[layer_id][b]];
      if (contributes_loss) {
        blobs_under_loss.insert(blob_name);
      } else {
        bottom_need_backward_[layer_id][b] = false;
      }
      if (!bottom_need_backward_[layer_id][b]) blobs_skip_backprop.insert(blob_name);
    }
  }
  if (param.force_backward()) {
    for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
      layer_need_backward_[layer_id] = true;
      for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
        const bool need = bottom_need_backward_[layer_id][b] ||
                          layers_[layer_id]->AllowForceBackward(static_cast<int>(b));
        bottom_need_backward_[layer_id][b] = need;
        blob_need_backward_[bottom_id_vecs_[layer_id][b]] =
            blob_need_backward_[bottom_id_vecs_[layer_id][b]] || need;
      }
      for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
        layers_[layer_id]->set_param_propagate_down(static_cast<int>(p), true);
      }
    }
  }

  // Whatever no layer consumed is an output of the net.
  for (const auto& kv : available) {
    net_output_blob_indices_.push_back(kv.second);
  }
  std::sort(net_output_blob_indices_.begin(), net_output_blob_indices_.end());
  for (int id : net_output_blob_indices_) net_output_blobs_.push_back(blobs_[id].get());
  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    if (!layers_[layer_id]->IsNetInput()) continue;
    for (int id : top_id_vecs_[layer_id]) {
      net_input_blob_indices_.push_back(id);
      net_input_blobs_.push_back(blobs_[id].get());
    }
  }

  // Fusion: each layer absorbs what it can of the layers right after it that work in place on its one top and
  // need backward as it does (Layer::Absorb). The absorbed layers' parameters are then read by the absorbing
  // layer's forward and their gradients are final after its backward where it takes theirs (below). The hooks
  // still fire for every layer.
  std::vector<int> absorbed_by(num_layers, -1);
  if (layer_fusion_enabled()) {
    for (int l = 0; l < num_layers; ++l) {
      if (layers_[l]->absorbed() || top_id_vecs_[l].size() != 1) continue;
      const int blob = top_id_vecs_[l][0];
      for (int next = l + 1; next < num_layers; ++next) {
        const bool in_place_on_blob = bottom_id_vecs_[next].size() == 1 && top_id_vecs_[next].size() == 1 &&
                                      bottom_id_vecs_[next][0] == blob && top_id_vecs_[next][0] == blob;
        if (!in_place_on_blob || layer_need_backward_[next] != layer_need_backward_[l] ||
            !layers_[l]->Absorb(*layers_[next])) {
          break;
        }
        layers_[next]->set_absorbed(true, layers_[l]->AbsorbsBackward());
        absorbed_by[next] = l;
      }
    }
  }

  // Layouts: a blob may be left channel-blocked (strata/memory_format.hpp) when every layer reading it accepts that and
  // the caller does not read it as an output (reading it would convert it back, which costs more than the reorder
  // it saves). A Split's tops share its bottom's memory, so a Split accepts a blocked bottom only where all its
  // tops may be blocked: hence the walk from the last layer back.
  {
    std::vector<bool> blockable(blobs_.size(), blocked_layouts_enabled());
    for (int id : net_output_blob_indices_) blockable[id] = false;
    for (int l = num_layers - 1; l >= 0; --l) {
      bool accepts = layers_[l]->AcceptsBlockedBottoms();
      if (layers_[l]->IsSplit()) {
        for (int t : top_id_vecs_[l]) accepts = accepts && blockable[t];
      }
      if (!accepts) {
        for (int b : bottom_id_vecs_[l]) blockable[b] = false;
      }
    }
    for (int l = 0; l < num_layers; ++l) {
      std::vector<bool> may_block;
      for (int t : top_id_vecs_[l]) may_block.push_back(blockable[t]);
      layers_[l]->set_top_may_block(std::move(may_block));
    }
  }

  // Inputs that a layer rebuilds in its backward need not be kept: a blob read only by such a layer (splits
  // make sure a blob has one reader), produced by an earlier layer and not written in place, is dropped after
  // its reader's forward; the reader's backward writes it back; it is dropped again once its producer's
  // backward, the last to read it, is done. A stack of reversible blocks then keeps no input of any block.
  drop_after_forward_.assign(num_layers, {});
  drop_after_backward_.assign(num_layers, {});
  {
    std::vector<int> readers(blobs_.size(), 0), producer(blobs_.size(), -1);
    for (int l = 0; l < num_layers; ++l) {
      for (int b : bottom_id_vecs_[l]) ++readers[b];
      for (int t : top_id_vecs_[l]) {
        if (producer[t] < 0) producer[t] = l;
      }
    }
    for (int l = 0; l < num_layers; ++l) {
      if (!layers_[l]->RebuildsBottomsInBackward() || !layer_need_backward_[l]) continue;
      for (int b : bottom_id_vecs_[l]) {
        const bool in_place =
            std::find(top_id_vecs_[l].begin(), top_id_vecs_[l].end(), b) != top_id_vecs_[l].end();
        const int p = producer[b];
        if (readers[b] != 1 || in_place || p < 0 || p >= l || layers_[p]->IsNetInput()) continue;
        drop_after_forward_[l].push_back(b);
        drop_after_backward_[p].push_back(b);
      }
    }
  }

  // Gradient readiness: a learnable parameter is final after the backward of the lowest layer using it.
  final_after_.assign(num_layers, {});
  layer_learnable_ids_.assign(num_layers, {});
  std::vector<int> lowest_user(learnable_params_.size(), num_layers);
  for (size_t p = 0; p < params_.size(); ++p) {
    const int owner = param_owners_[p] < 0 ? static_cast<int>(p) : param_owners_[p];
    const int learnable_id = learnable_param_ids_[owner];
    // An absorbed layer's parameters are read by the forward of the layer that absorbed it, and their gradients
    // are computed by its backward when it took that too.
    const int layer_id = param_layer_indices_[p].first;
    const int reader = absorbed_by[layer_id] >= 0 ? absorbed_by[layer_id] : layer_id;
    const int writer = layers_[layer_id]->backward_absorbed() ? reader : layer_id;
    lowest_user[learnable_id] = std::min(lowest_user[learnable_id], writer);
    layer_learnable_ids_[reader].push_back(learnable_id);
  }
  for (size_t l = 0; l < lowest_user.size(); ++l) final_after_[lowest_user[l]].push_back(static_cast<int>(l));

  LogGpuFormats();
  CheckBuiltNet(*this);
}

// precision: BF16 (FP16) is a request that a layer without 16-bit kernels (or a device without them) meets in float:
// say which layers compute in 16 bits. On the GPU those keep their tops in 16 bits, and a float layer reading one
// converts it (and its gradient) each pass: name those boundaries once, here (docs/gpu.md, "bfloat16"). Likewise the
// layers that read channels-last activations channels-first (Layer::GpuActivationOrder; docs/gpu.md,
// "Channels-last").
template <typename Dtype>
void Net<Dtype>::LogGpuFormats() const {
  using Order = typename Layer<Dtype>::GpuOrder;
  // Per 16-bit precision (BF16, FP16): the layers asking for it, and those computing in it.
  std::vector<std::string> asked[2], computing[2];
  std::vector<bool> held_in_16bit(blobs_.size(), false), channels_last(blobs_.size(), false);
  std::string boundaries, reorders;
  int converting = 0, reordering = 0;
  bool makes_channels_last = false;
  const auto name_of = [](const Layer<Dtype>& layer) { return layer.layer_param().name() + " (" + layer.type() + ")"; };
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer<Dtype>& layer = *layers_[l];
    const bool in_16bit = layer.ComputesIn16Bit();
    const Precision precision = layer.layer_param().precision();
    if (precision != FP32) {
      const int p = precision == BF16 ? 0 : 1;
      asked[p].push_back(layer.layer_param().name());
      if (in_16bit) computing[p].push_back(layer.layer_param().name());
    }
    // A layer computed inside another (Layer::Absorb) reads nothing itself.
    if (Strata::mode() != Strata::GPU || (layer.absorbed() && layer.backward_absorbed())) continue;
    bool reads_16bit = false, reorders_bytes = false;
    for (int b : bottom_id_vecs_[l]) {
      reads_16bit = reads_16bit || held_in_16bit[b];
      // With one channel or one position per image both orders are the same bytes: no conversion runs.
      reorders_bytes = reorders_bytes || (channels_last[b] && blobs_[b]->shape(1) > 1 && blobs_[b]->count(2) > 1);
    }
    // A Split sums its tops' gradients in 16 bits when they all are (split_layer.cu): it converts nothing.
    if (reads_16bit && !in_16bit && !layer.IsSplit() && converting++ < 8) {
      boundaries += (boundaries.empty() ? "" : ", ") + name_of(layer);
    }
    const Order order = layer.GpuActivationOrder();
    makes_channels_last = makes_channels_last || order == Order::kMakesChannelsLast;
    if (reorders_bytes && order == Order::kChannelsFirst && !layer.IsSplit() && reordering++ < 8) {
      reorders += (reorders.empty() ? "" : ", ") + name_of(layer);
    }
    const bool bottom_last = !bottom_id_vecs_[l].empty() && channels_last[bottom_id_vecs_[l][0]];
    // A Split's tops share its bottom's memory, in whatever element type and order.
    for (size_t k = 0; k < top_id_vecs_[l].size(); ++k) {
      const int t = top_id_vecs_[l][k];
      held_in_16bit[t] = layer.WritesTopIn16Bit(static_cast<int>(k)) || (layer.IsSplit() && reads_16bit);
      const bool follows = (order == Order::kFollowsBottom || layer.IsSplit()) && bottom_last;
      channels_last[t] = std::is_same<Dtype, float>::value && blobs_[t]->can_channels_last() &&
                         !layer.TopHoldsIndices(static_cast<int>(k)) &&
                         (order == Order::kMakesChannelsLast || follows);
    }
  }
  for (int p = 0; p < 2; ++p) {
    if (asked[p].empty()) continue;
    std::string names;
    for (const std::string& n : computing[p]) names += (names.empty() ? "" : ", ") + n;
    LOG(INFO) << "net '" << name_ << "': " << computing[p].size() << " of the " << asked[p].size()
              << " layers with precision " << (p == 0 ? "BF16 compute in bfloat16" : "FP16 compute in float16")
              << (names.empty() ? "" : " (" + names + ")") << "; the others compute in float";
  }
  if (converting > 0) {
    LOG(INFO) << "net '" << name_ << "': " << converting << " float layer" << (converting == 1 ? "" : "s")
              << " read blobs kept in 16 bits on the GPU and convert them each pass: " << boundaries
              << (converting > 8 ? ", ..." : "");
  }
  if (makes_channels_last) {
    LOG(INFO) << "net '" << name_ << "': the convolutions keep their activations channels-last (NHWC) on the GPU"
              << (reordering == 0 ? "" : "; " + std::to_string(reordering) + " layer" +
                                             (reordering == 1 ? " reads" : "s read") +
                                             " them channels-first and converts each pass: " + reorders +
                                             (reordering > 8 ? ", ..." : ""));
  }
}

template <typename Dtype>
void Net<Dtype>::AppendTop(const NetParameter& param, int layer_id, int top_id,
                           std::map<std::string, int>* available) {
  const LayerParameter& lp = param.layer(layer_id);
  const std::string name = top_id >= 0 ? lp.top(top_id) : "(automatic)";
  const bool in_place = top_id >= 0 && top_id < lp.bottom_size() && lp.bottom(top_id) == name;
  if (in_place) {
    // The layer writes over its bottom: the top is the same blob.
    const int blob_id = bottom_id_vecs_[layer_id][top_id];
    top_vecs_[layer_id].push_back(blobs_[blob_id].get());
    top_id_vecs_[layer_id].push_back(blob_id);
    (*available)[name] = blob_id;
    return;
  }
  if (top_id >= 0) {
    STRATA_REQUIRE(blob_names_index_.count(name) == 0)
        << "layer '" << lp.name() << "' (" << lp.type() << "): top blob '" << name
        << "' is already produced by another layer (only in-place layers may reuse a name, with the same "
           "bottom at the same position)";
  }
  auto blob = std::make_shared<Blob<Dtype>>();
  blob->set_memory_category(MemoryCategory::kActivation);
  const int blob_id = static_cast<int>(blobs_.size());
  blobs_.push_back(blob);
  blob_names_.push_back(name);
  blob_need_backward_.push_back(false);
  if (top_id >= 0) blob_names_index_[name] = blob_id;
  top_id_vecs_[layer_id].push_back(blob_id);
  top_vecs_[layer_id].push_back(blob.get());
  if (top_id >= 0) (*available)[name] = blob_id;
}

template <typename Dtype>
int Net<Dtype>::AppendBottom(const NetParameter& param, int layer_id, int bottom_id,
                             std::map<std::string, int>* available) {
  const LayerParameter& lp = param.layer(layer_id);
  const std::string& name = lp.bottom(bottom_id);
  auto it = available->find(name);
  STRATA_REQUIRE(it != available->end())
      << "layer '" << lp.name() << "' (" << lp.type() << "): unknown bottom blob '" << name
      << "' (no earlier layer in phase " << Phase_Name(phase_) << " produces it)";
  const int blob_id = it->second;
  bottom_vecs_[layer_id].push_back(blobs_[blob_id].get());
  bottom_id_vecs_[layer_id].push_back(blob_id);
  available->erase(it);
  bool need_backward = blob_need_backward_[blob_id];
  if (lp.propagate_down_size() > 0) need_backward = lp.propagate_down(bottom_id);
  bottom_need_backward_[layer_id].push_back(need_backward);
  return blob_id;
}

template <typename Dtype>
void Net<Dtype>::AppendParam(const NetParameter& param, int layer_id, int param_id) {
  const Layer<Dtype>& layer = *layers_[layer_id];
  const LayerParameter& lp = layer.layer_param();
  const int net_param_id = static_cast<int>(params_.size());
  auto blob = layers_[layer_id]->blobs()[param_id];
  blob->set_memory_category(MemoryCategory::kParameter);
  params_.push_back(blob);
  param_id_vecs_[layer_id].push_back(net_param_id);
  param_layer_indices_.push_back({layer_id, param_id});
  ParamSpec default_spec;
  const ParamSpec& spec = param_id < lp.param_size() ? lp.param(param_id) : default_spec;
  const std::string& param_name = spec.name();
  param_display_names_.push_back(param_name.empty() ? lp.name() + "[" + std::to_string(param_id) + "]"
                                                     : param_name);
  auto owner_it = param_name.empty() ? param_names_index_.end() : param_names_index_.find(param_name);
  if (owner_it == param_names_index_.end()) {
    // A new (owned) parameter.
    if (!param_name.empty()) param_names_index_[param_name] = net_param_id;
    param_owners_.push_back(-1);
    learnable_param_ids_.push_back(static_cast<int>(learnable_params_.size()));
    learnable_params_.push_back(blob.get());
    const bool statistic = layer.ParamIsStatistic(param_id);
    params_lr_.push_back(spec.lr_mult());
    params_weight_decay_.push_back(statistic ? 0.f : spec.decay_mult());
    learnable_param_statistic_.push_back(statistic);
    return;
  }
  // Shared with an earlier parameter of the same name: use the owner's memory for data and gradient.
  const int owner_id = owner_it->second;
  param_owners_.push_back(owner_id);
  learnable_param_ids_.push_back(learnable_param_ids_[owner_id]);
  Blob<Dtype>* owner = params_[owner_id].get();
  const auto& owner_lp = layers_[param_layer_indices_[owner_id].first]->layer_param();
  const bool strict = spec.share_mode() != ParamSpec::PERMISSIVE;
  if (strict) {
    STRATA_REQUIRE(owner->shape() == blob->shape())
        << "layer '" << lp.name() << "' shares param '" << param_name << "' with layer '" << owner_lp.name()
        << "' but the shapes differ: " << blob->shape_string() << " vs " << owner->shape_string();
  } else {
    STRATA_REQUIRE(owner->count() == blob->count())
        << "layer '" << lp.name() << "' shares param '" << param_name << "' with layer '" << owner_lp.name()
        << "' but the counts differ: " << blob->count() << " vs " << owner->count();
  }
  const int learnable_id = learnable_param_ids_[owner_id];
  // lr_mult / decay_mult given on a sharer must agree with the owner's (unset means "same as owner").
  if (spec.has_lr_mult()) {
    STRATA_REQUIRE(params_lr_[learnable_id] == spec.lr_mult())
        << "layer '" << lp.name() << "' shares param '" << param_name << "' with a different lr_mult";
  }
  if (spec.has_decay_mult()) {
    STRATA_REQUIRE(params_weight_decay_[learnable_id] == spec.decay_mult())
        << "layer '" << lp.name() << "' shares param '" << param_name << "' with a different decay_mult";
  }
  blob->ShareData(*owner);
  blob->ShareDiff(*owner);
}

template <typename Dtype>
Dtype Net<Dtype>::RunLayerForward(int i) {
  for (auto& h : before_forward_) h.fn(i);
  const Dtype loss = layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
  for (auto& h : after_forward_) h.fn(i);
  return loss;
}

template <typename Dtype>
void Net<Dtype>::RunLayerBackward(int i) {
  for (auto& h : before_backward_) h.fn(i);
  if (layer_need_backward_[i]) layers_[i]->Backward(top_vecs_[i], bottom_need_backward_[i], bottom_vecs_[i]);
  for (auto& h : after_backward_) h.fn(i);
}

template <typename Dtype>
Dtype Net<Dtype>::ForwardFromTo(int start, int end) {
  CHECK_GE(start, 0);
  CHECK_LT(end, num_layers());
  Dtype loss = 0;
  for (int i = start; i <= end; ++i) {
    loss += RunLayerForward(i);
    for (int b : drop_after_forward_[i]) blobs_[b]->release_memory();
  }
  return loss;
}

template <typename Dtype>
const std::vector<Blob<Dtype>*>& Net<Dtype>::Forward(Dtype* loss) {
  Dtype l = 0;
  if (runner_) {
    l = runner_->Forward(*this);
  } else if (num_layers()) {
    l = ForwardFromTo(0, num_layers() - 1);
  }
  if (loss) *loss = l;
  return net_output_blobs_;
}

template <typename Dtype>
void Net<Dtype>::BackwardFromTo(int start, int end) {
  CHECK_GE(end, 0);
  CHECK_LT(start, num_layers());
  for (int i = start; i >= end; --i) {
    RunLayerBackward(i);
    for (int b : drop_after_backward_[i]) blobs_[b]->release_memory();
  }
}

template <typename Dtype>
void Net<Dtype>::Backward() {
  if (runner_) {
    runner_->Backward(*this);
  } else if (num_layers()) {
    BackwardFromTo(num_layers() - 1, 0);
  }
}

template <typename Dtype>
void Net<Dtype>::BackwardKeepingValues() {
  if (runner_) {
    runner_->BackwardKeepingValues(*this);
  } else {
    // The plain passes free no value a backward reads but a reversible block's input, which the block rebuilds
    // again from its output.
    Backward();
  }
}

template <typename Dtype>
int Net<Dtype>::batch_size() const {
  for (int l = 0; l < num_layers(); ++l) {
    if (!layers_[l]->IsBatchSource() || top_vecs_[l].empty()) continue;
    const Blob<Dtype>& first = *top_vecs_[l][0];
    return first.num_axes() ? first.shape(0) : 1;
  }
  return 0;
}

template <typename Dtype>
void Net<Dtype>::Reshape() {
  for (int i = 0; i < num_layers(); ++i) layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
}

template <typename Dtype>
void Net<Dtype>::RemoveHooks(const void* owner) {
  for (auto* hooks : {&before_forward_, &after_forward_, &before_backward_, &after_backward_}) {
    hooks->erase(std::remove_if(hooks->begin(), hooks->end(), [owner](const OwnedHook& h) { return h.owner == owner; }),
                 hooks->end());
  }
}

template <typename Dtype>
void Net<Dtype>::ClearParamDiffs() {
  for (Blob<Dtype>* p : learnable_params_) p->clear_diff();
}

template <typename Dtype>
void Net<Dtype>::set_loss_scale(Dtype scale) {
  loss_scale_ = scale;
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->set_loss_scale(scale, top_vecs_[i]);
}

template <typename Dtype>
void Net<Dtype>::Update() {
  for (Blob<Dtype>* p : learnable_params_) p->Update();
}

template <typename Dtype>
size_t Net<Dtype>::num_learnable_values() const {
  size_t n = 0;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (param_owners_[p] >= 0) continue;
    const auto& where = param_layer_indices_[p];
    if (layers_[where.first]->ParamIsStatistic(where.second)) continue;
    n += static_cast<size_t>(params_[p]->count());
  }
  return n;
}

template <typename Dtype>
std::shared_ptr<Blob<Dtype>> Net<Dtype>::blob_by_name(const std::string& name) const {
  auto it = blob_names_index_.find(name);
  STRATA_REQUIRE(it != blob_names_index_.end()) << "net '" << name_ << "' has no blob named '" << name << "'";
  return blobs_[it->second];
}

template <typename Dtype>
std::shared_ptr<Layer<Dtype>> Net<Dtype>::layer_by_name(const std::string& name) const {
  return layers_[layer_index(name)];
}

template <typename Dtype>
int Net<Dtype>::layer_index(const std::string& name) const {
  auto it = layer_names_index_.find(name);
  STRATA_REQUIRE(it != layer_names_index_.end()) << "net '" << name_ << "' has no layer named '" << name << "'";
  return it->second;
}

template <typename Dtype>
void Net<Dtype>::ShareTrainedLayersWith(const Net* other) {
  for (int i = 0; i < other->num_layers(); ++i) {
    auto it = layer_names_index_.find(other->layer_names()[i]);
    if (it == layer_names_index_.end()) continue;
    auto& mine = layers_[it->second]->blobs();
    auto& theirs = other->layers()[i]->blobs();
    STRATA_REQUIRE(mine.size() == theirs.size())
        << "layer '" << other->layer_names()[i] << "' has " << mine.size() << " parameter blobs here but "
        << theirs.size() << " in the net it shares with";
    for (size_t j = 0; j < mine.size(); ++j) {
      STRATA_REQUIRE(mine[j]->shape() == theirs[j]->shape())
          << "layer '" << other->layer_names()[i] << "' param " << j << " has shape " << mine[j]->shape_string()
          << " here but " << theirs[j]->shape_string() << " in the net it shares with";
      mine[j]->ShareData(*theirs[j]);
    }
  }
}

template <typename Dtype>
std::vector<std::string> Net<Dtype>::CopyTrainedLayersFrom(const NetParameter& in_param) {
  NetParameter param(in_param);
  UpgradeV1Net(&param);
  std::set<int> copied;  // this net's layers with parameters that the weights set
  for (const auto& source : param.layer()) {
    auto it = layer_names_index_.find(source.name());
    if (it == layer_names_index_.end()) {
      VLOG(1) << "ignoring source layer " << source.name();
      continue;
    }
    auto& target = layers_[it->second]->blobs();
    STRATA_REQUIRE(static_cast<int>(target.size()) == source.blobs_size())
        << "cannot copy weights of layer '" << source.name() << "': the file has " << source.blobs_size()
        << " blob(s), the net expects " << target.size();
    for (size_t j = 0; j < target.size(); ++j) {
      if (!target[j]->ShapeEquals(source.blobs(static_cast<int>(j)))) {
        Blob<Dtype> stored;
        stored.FromProto(source.blobs(static_cast<int>(j)), true);
        STRATA_FAIL() << "cannot copy weights of layer '" << source.name() << "' param " << j
                      << ": shape mismatch, the file has " << stored.shape_string() << ", the net expects "
                      << target[j]->shape_string();
      }
      target[j]->FromProto(source.blobs(static_cast<int>(j)), false);
    }
    if (!target.empty()) copied.insert(it->second);
  }
  std::vector<std::string> untouched;
  for (int i = 0; i < num_layers(); ++i) {
    if (!layers_[i]->blobs().empty() && !copied.count(i)) untouched.push_back(layer_names_[i]);
  }
  STRATA_REQUIRE(!copied.empty()) << "the weights (" << param.layer_size() << " layer(s)"
                                  << (param.name().empty() ? "" : " of net '" + param.name() + "'")
                                  << ") set no layer of net '" << name_ << "'"
                                  << (untouched.empty() ? ", which has no parameters"
                                                        : ": no layer name with parameters matches");
  return untouched;
}

template <typename Dtype>
std::vector<std::string> Net<Dtype>::CopyTrainedLayersFrom(const std::string& caffemodel_file) {
  NetParameter param;
  ReadNetParamsFromBinaryFile(caffemodel_file, &param);
  try {
    return CopyTrainedLayersFrom(param);
  } catch (const Error& e) {
    throw Error(caffemodel_file + ": " + e.what());
  }
}

template <typename Dtype>
void Net<Dtype>::ToProto(NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (int i = 0; i < num_layers(); ++i) {
    // Split layers are an artefact of this build of the graph, not part of the model.
    if (layers_[i]->IsSplit()) continue;
    layers_[i]->ToProto(param->add_layer(), write_diff);
  }
}

STRATA_INSTANTIATE_CLASS(Net);

}  // namespace strata
