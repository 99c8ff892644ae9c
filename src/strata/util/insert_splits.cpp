#include "strata/util/insert_splits.hpp"

#include <map>
#include <string>
#include <utility>

#include "strata/common.hpp"

namespace strata {

namespace {

std::string split_layer_name(const std::string& blob, const std::string& layer, int top_index) {
  return blob + "_" + layer + "_" + std::to_string(top_index) + "_split";
}

std::string split_top_name(const std::string& blob, const std::string& layer, int top_index, int copy) {
  return split_layer_name(blob, layer, top_index) + "_" + std::to_string(copy);
}

// The loss weight a top carries: the explicit one, or Caffe's default of 1 on a loss layer's first top.
float effective_loss_weight(const LayerParameter& layer, int top) {
  if (layer.loss_weight_size() > 0) return top < layer.loss_weight_size() ? layer.loss_weight(top) : 0.f;
  const std::string& type = layer.type();
  const bool is_loss = type.size() >= 4 && type.compare(type.size() - 4, 4, "Loss") == 0;
  return (is_loss && top == 0) ? 1.f : 0.f;
}

}  // namespace

void InsertSplits(const NetParameter& param, NetParameter* out) {
  out->CopyFrom(param);
  out->clear_layer();

  // A (layer, top index) pair identifies one produced value; in-place layers produce new values under the
  // same name, so the latest producer of each name is tracked while walking forward.
  using Producer = std::pair<int, int>;
  std::map<std::string, Producer> latest_producer;
  std::map<Producer, int> consumers;
  std::map<std::pair<int, int>, Producer> bottom_source;  // (layer, bottom index) -> producer
  std::map<Producer, float> loss_weight;

  const int num_layers = param.layer_size();
  for (int i = 0; i < num_layers; ++i) {
    const LayerParameter& layer = param.layer(i);
    for (int b = 0; b < layer.bottom_size(); ++b) {
      auto it = latest_producer.find(layer.bottom(b));
      // Unknown bottoms are reported by Net with the layer's name; leave them alone here.
      if (it == latest_producer.end()) continue;
      bottom_source[{i, b}] = it->second;
      ++consumers[it->second];
    }
    for (int t = 0; t < layer.top_size(); ++t) {
      latest_producer[layer.top(t)] = {i, t};
      const float w = effective_loss_weight(layer, t);
      if (w != 0) loss_weight[{i, t}] = w;
    }
  }
  // A loss top that is also consumed needs a split too: one copy feeds the consumers, one carries the loss.
  auto needs_split = [&](const Producer& p) {
    auto it = consumers.find(p);
    const int n = it == consumers.end() ? 0 : it->second;
    return n > 1 || (n > 0 && loss_weight.count(p));
  };

  std::map<Producer, int> copies_handed_out;
  for (int i = 0; i < num_layers; ++i) {
    LayerParameter* layer = out->add_layer();
    layer->CopyFrom(param.layer(i));
    // Rewire bottoms to their split copies.
    for (int b = 0; b < layer->bottom_size(); ++b) {
      auto src = bottom_source.find({i, b});
      if (src == bottom_source.end() || !needs_split(src->second)) continue;
      const Producer& p = src->second;
      const std::string& producer_name = param.layer(p.first).name();
      layer->set_bottom(b, split_top_name(layer->bottom(b), producer_name, p.second, copies_handed_out[p]++));
    }
    // Add a Split after each top that needs one.
    for (int t = 0; t < layer->top_size(); ++t) {
      const Producer p{i, t};
      if (!needs_split(p)) continue;
      const std::string& blob = layer->top(t);
      LayerParameter* split = out->add_layer();
      split->set_name(split_layer_name(blob, layer->name(), t));
      split->set_type("Split");
      split->add_bottom(blob);
      const int n = consumers[p] + (loss_weight.count(p) ? 1 : 0);
      for (int k = 0; k < n; ++k) {
        split->add_top(split_top_name(blob, layer->name(), t, k));
        // The loss copy is the last one; the producer keeps its loss weight cleared.
        if (loss_weight.count(p)) split->add_loss_weight(k == n - 1 ? loss_weight[p] : 0.f);
      }
      if (loss_weight.count(p)) {
        // The producer's own top no longer carries the loss: the split's last copy does.
        if (layer->loss_weight_size() == 0) {
          for (int k = 0; k < layer->top_size(); ++k) layer->add_loss_weight(effective_loss_weight(*layer, k));
        }
        layer->set_loss_weight(t, 0.f);
      }
    }
  }
}

}  // namespace strata
