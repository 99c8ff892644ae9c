#include "strata/recompute/graph.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "strata/common.hpp"
#include "strata/memory_format.hpp"
#include "strata/net.hpp"

namespace strata {

int NodeSet::size() const {
  int s = 0;
  for (uint64_t w : words_) s += __builtin_popcountll(w);
  return s;
}

bool NodeSet::subset_of(const NodeSet& o) const {
  for (size_t i = 0; i < words_.size(); ++i)
    if (words_[i] & ~o.words_[i]) return false;
  return true;
}

NodeSet NodeSet::minus(const NodeSet& o) const {
  NodeSet r = *this;
  for (size_t i = 0; i < r.words_.size(); ++i) r.words_[i] &= ~o.words_[i];
  return r;
}

std::vector<int> NodeSet::members() const {
  std::vector<int> m;
  for (int v = 0; v < n_; ++v)
    if (has(v)) m.push_back(v);
  return m;
}

size_t RecomputeGraph::total_bytes() const {
  NodeSet all(size());
  for (int v = 0; v < size(); ++v) all.add(v);
  return source_bytes + SegmentPeak(NodeSet(size()), all, all, all, true);
}

namespace {

// The most a forward holds when `made` (layer, bytes) appear with their layer's forward and `dead` go once
// theirs is done.
size_t ForwardPeak(std::vector<std::pair<int, size_t>> made, std::vector<std::pair<int, size_t>> dead) {
  std::sort(made.begin(), made.end());
  std::sort(dead.begin(), dead.end());
  size_t level = 0, peak = 0;
  for (size_t m = 0, d = 0; m < made.size() || d < dead.size();) {
    const int t = std::min(m < made.size() ? made[m].first : std::numeric_limits<int>::max(),
                           d < dead.size() ? dead[d].first : std::numeric_limits<int>::max());
    for (; m < made.size() && made[m].first == t; ++m) level += made[m].second;
    peak = std::max(peak, level);
    for (; d < dead.size() && dead[d].first == t; ++d) level -= dead[d].second;
  }
  return peak;
}

}  // namespace

size_t RecomputeGraph::SegmentPeak(const NodeSet& lower, const NodeSet& upper, const NodeSet& live,
                                   const NodeSet& with_state, bool last) const {
  constexpr int kBefore = std::numeric_limits<int>::max();
  size_t forward = 0, level = 0;
  std::vector<std::pair<int, size_t>> made, dead;  // forward of the last segment: (layer, bytes)
  std::vector<std::pair<int, size_t>> appear, go;  // (layer, bytes)
  auto gradients_of = [&](const Node& n) {
    for (const Node::Gradient& gr : n.gradients) {
      int t = -1;
      for (int l : gr.layers) {
        const int w = node_of_layer[l];
        if (w < 0 || lower.has(w)) continue;  // sources and earlier segments run backward after V
        t = upper.has(w) ? std::max(t, l) : kBefore;
        if (t == kBefore) break;
      }
      if (t == kBefore) {
        level += gr.bytes;
      } else if (t >= 0) {
        appear.push_back({t, gr.bytes});
      }
    }
  };
  for (int v = 0; v < size(); ++v) {
    const Node& n = nodes[v];
    if (lower.has(v)) {
      gradients_of(n);
      continue;
    }
    if (!upper.has(v)) continue;
    const bool early = last && n.frees_after_last_reader;
    if (last) {
      made.push_back({n.layers.front(), n.bytes + n.state_bytes()});
      if (early) dead.push_back({n.last_reader, n.bytes});
    } else {
      forward += n.bytes + n.state_bytes();
    }
    size_t held = 0;
    if (live.has(v) && !early) held += n.bytes;
    level += held;
    if (with_state.has(v)) {
      level += n.state_bytes();
      go.insert(go.end(), n.layer_states.begin(), n.layer_states.end());
    }
    gradients_of(n);
    for (const Node::Gradient& gr : n.gradients) held += gr.bytes;
    go.push_back({n.layers.front(), held});
  }
  if (last) forward = ForwardPeak(made, dead);
  auto later_first = [](const std::pair<int, size_t>& a, const std::pair<int, size_t>& b) { return a.first > b.first; };
  std::sort(appear.begin(), appear.end(), later_first);
  std::sort(go.begin(), go.end(), later_first);
  size_t peak = level;  // the recomputation runs before any backward of V
  for (size_t a = 0, r = 0; a < appear.size() || r < go.size();) {
    const int t = std::max(a < appear.size() ? appear[a].first : -1, r < go.size() ? go[r].first : -1);
    for (; a < appear.size() && appear[a].first == t; ++a) level += appear[a].second;
    peak = std::max(peak, level);
    for (; r < go.size() && go[r].first == t; ++r) level -= go[r].second;
  }
  return std::max(forward, peak);
}

double RecomputeGraph::forward_flops() const {
  double f = 0;
  for (const Node& n : nodes) f += n.flops;
  return f;
}

void RecomputeGraph::Finish() {
  for (Node& n : nodes) n.preds.clear();
  for (int u = 0; u < size(); ++u) {
    auto& s = nodes[u].succs;
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    for (int v : s) {
      CHECK_GT(v, u) << "recompute graph nodes must be in topological order";
      nodes[v].preds.push_back(u);
    }
  }
}

RecomputeGraph RecomputeGraph::FromEdges(const std::vector<size_t>& bytes, const std::vector<double>& flops,
                                         const std::vector<std::pair<int, int>>& edges,
                                         const std::vector<bool>& needed_in_backward,
                                         const std::vector<size_t>& state, const std::vector<size_t>& diffs) {
  STRATA_REQUIRE(bytes.size() == flops.size() && (state.empty() || state.size() == bytes.size()) &&
                 (diffs.empty() || diffs.size() == bytes.size()))
      << "recompute graph: " << bytes.size() << " byte counts but " << flops.size() << " costs, "
      << state.size() << " state and " << diffs.size() << " gradient sizes";
  RecomputeGraph g;
  g.nodes.resize(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    g.nodes[i].name = "n" + std::to_string(i);
    g.nodes[i].layers = {static_cast<int>(i)};
    g.nodes[i].bytes = bytes[i];
    g.nodes[i].flops = flops[i];
    if (!needed_in_backward.empty()) g.nodes[i].needed_in_backward = needed_in_backward[i];
    if (!state.empty() && state[i] > 0) g.nodes[i].layer_states = {{static_cast<int>(i), state[i]}};
    g.nodes[i].backward_reads_state = !g.nodes[i].layer_states.empty();
    if (!diffs.empty() && diffs[i] > 0) g.nodes[i].gradients.push_back({diffs[i], {static_cast<int>(i)}});
    g.node_of_layer.push_back(static_cast<int>(i));
  }
  for (const auto& e : edges) {
    STRATA_REQUIRE(e.first >= 0 && e.first < e.second && e.second < g.size())
        << "recompute graph: edge " << e.first << " -> " << e.second << " is not forward in node order";
    g.nodes[e.first].succs.push_back(e.second);
    for (auto& gr : g.nodes[e.first].gradients) gr.layers.push_back(e.second);
  }
  g.Finish();
  return g;
}

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  // Keeps the smaller id as the root so that a group's root is its first layer.
  void unite(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

template <typename Dtype>
double layer_flops(Layer<Dtype>& layer, const std::vector<Blob<Dtype>*>& bottom,
                   const std::vector<Blob<Dtype>*>& top) {
  // One operation per element read or written: right in order of magnitude for element-wise layers,
  // pooling and normalisation, and small beside the GEMMs of layers with weights.
  double f = 0;
  for (const Blob<Dtype>* b : bottom) f += b->count();
  for (const Blob<Dtype>* t : top) f += t->count();
  // Convolution and InnerProduct: each output element is a dot product over one row of the weight
  // (weight count / outputs), a multiply and an add per term.
  if (!layer.blobs().empty() && !top.empty() && layer.blobs()[0]->num_axes() >= 2) {
    const Blob<Dtype>& w = *layer.blobs()[0];
    f += 2.0 * top[0]->count() * (static_cast<double>(w.count()) / w.shape(0));
  }
  return f;
}

}  // namespace

namespace {
template <typename Dtype>
bool has_loss_weight(const Net<Dtype>& net, size_t blob_id) {
  return blob_id < net.blob_loss_weights().size() && net.blob_loss_weights()[blob_id] != Dtype(0);
}
}  // namespace

template <typename Dtype>
std::vector<bool> PinnedBlobs(const Net<Dtype>& net) {
  std::vector<bool> pinned(net.blobs().size(), false);
  for (int out : net.output_blob_ids()) pinned[out] = true;
  // A loss's gradient is its loss weight, written once when the net is built.
  for (size_t b = 0; b < pinned.size(); ++b) pinned[b] = pinned[b] || has_loss_weight(net, b);
  return pinned;
}

template <typename Dtype>
std::vector<std::vector<int>> GradientLayers(const Net<Dtype>& net) {
  std::vector<std::vector<int>> touch(net.blobs().size());
  for (int l = 0; l < net.num_layers(); ++l) {
    // A layer that runs backward reads its tops' gradients; one that propagates down writes its bottoms'.
    if (net.layer_need_backward(l))
      for (int t : net.top_ids()[l]) touch[t].push_back(l);
    for (size_t k = 0; k < net.bottom_ids()[l].size(); ++k)
      if (net.bottom_need_backward()[l][k]) touch[net.bottom_ids()[l][k]].push_back(l);
  }
  return touch;
}

namespace {

// Whether a layer only hands its bottoms' memory on (Split, Flatten, Reshape, a one-input Concat): its tops share a
// bottom's data and it touches no value itself.
template <typename Dtype>
bool only_aliases(const Net<Dtype>& net, int l) {
  if (net.layers()[l]->IsSplit()) return true;
  const auto& tops = net.top_vecs()[l];
  const auto& bottoms = net.bottom_vecs()[l];
  if (tops.empty()) return false;
  for (const Blob<Dtype>* t : tops) {
    bool shares = false;
    for (const Blob<Dtype>* b : bottoms) shares = shares || (t != b && t->data() == b->data());
    if (!shares) return false;
  }
  return true;
}

// Whether a layer keeps what it writes in 16 bits in device memory: on the GPU, a layer that computes in bfloat16 or
// float16 (docs/gpu.md, "bfloat16"). On the CPU bfloat16 lives only inside oneDNN's multiplications.
template <typename Dtype>
bool stores_16bit(const Layer<Dtype>& layer) {
  return Strata::mode() == Strata::GPU && layer.ComputesIn16Bit();
}

// Which blocks of memory a GPU pass holds in 16 bits (docs/recompute.md, "bfloat16 on the GPU"). A float layer that
// reads a 16-bit block converts it to float in place, so a block takes 16-bit bytes only when every layer that
// touches it computes in 16 bits; counting the others as float keeps each block's count an upper bound.
template <typename Dtype>
class Blocks16Bit {
 public:
  // block: the block of memory holding a blob's data (a Split's tops hold their bottom's).
  template <typename Block>
  Blocks16Bit(const Net<Dtype>& net, const std::vector<std::vector<int>>& touch, Block block)
      : net_(net), touch_(touch) {
    const int n = net.num_layers();
    for (int l = 0; l < n; ++l) aliases_.push_back(only_aliases(net, l));
    for (int l = 0; l < n; ++l) {
      const Layer<Dtype>& layer = *net.layers()[l];
      // A layer computed inside another (Layer::Absorb) touches nothing itself.
      if (aliases_[l] || (layer.absorbed() && layer.backward_absorbed())) continue;
      const auto& tops = net.top_ids()[l];
      for (size_t k = 0; k < tops.size(); ++k) {
        const bool top_16bit = stores_16bit(layer) && layer.WritesTopIn16Bit(static_cast<int>(k));
        data_.emplace(block(tops[k]), true).first->second &= top_16bit;
      }
      for (int b : net.bottom_ids()[l]) data_.emplace(block(b), true).first->second &= stores_16bit(layer);
    }
    for (size_t b = 0; b < net.blobs().size(); ++b) sharing_diff_[net.blobs()[b]->diff().get()].push_back(b);
  }

  bool data(const SyncedMemory* block) const {
    auto it = data_.find(block);
    return it != data_.end() && it->second;
  }

  // A gradient is written by its consumers' backward and read by its producer's. A Split sums its tops' gradients
  // in 16 bits when they all are (split_layer.cu); a layer that only aliases shares its bottom's gradient.
  bool diff(int blob_id) {
    const SyncedMemory* mem = net_.blobs()[blob_id]->diff().get();
    auto it = diff_.find(mem);
    if (it != diff_.end()) return it->second;
    bool in_16bit = true;
    for (int b : sharing_diff_[mem]) {
      for (int l : touch_[b]) {
        const Layer<Dtype>& layer = *net_.layers()[l];
        if (layer.IsSplit()) {
          const auto& bottoms = net_.bottom_ids()[l];
          if (std::find(bottoms.begin(), bottoms.end(), b) == bottoms.end()) continue;  // a top: it converts nothing
          for (int t : net_.top_ids()[l]) in_16bit = in_16bit && diff(t);
        } else if (!aliases_[l]) {
          in_16bit = in_16bit && stores_16bit(layer);
        }
      }
    }
    diff_[mem] = in_16bit;
    return in_16bit;
  }

 private:
  const Net<Dtype>& net_;
  const std::vector<std::vector<int>>& touch_;
  std::vector<bool> aliases_;  // per layer: only_aliases
  std::map<const SyncedMemory*, bool> data_, diff_;
  std::map<const SyncedMemory*, std::vector<int>> sharing_diff_;
};

template <typename Dtype>
size_t element_bytes(bool in_16bit) {
  return in_16bit ? sizeof(uint16_t) : sizeof(Dtype);
}

}  // namespace

template <typename Dtype>
RecomputeGraph ExtractGraph(const Net<Dtype>& net) {
  const int num_layers = net.num_layers();
  const auto& blobs = net.blobs();
  const auto& layers = net.layers();

  // Which layer first wrote each block of memory; a later top on the same block (in place, or sharing its
  // bottom's data) ties that layer to the writer.
  // A Split shares its bottom's memory only when its Forward runs, so before the first forward its tops
  // still hold blocks of their own that will never be used: they count as its bottom's block.
  std::map<const SyncedMemory*, const SyncedMemory*> alias;
  auto block = [&](int blob_id) {
    const SyncedMemory* mem = blobs[blob_id]->data().get();
    auto it = alias.find(mem);
    return it == alias.end() ? mem : it->second;
  };
  for (int l = 0; l < num_layers; ++l) {
    if (!layers[l]->IsSplit() || net.bottom_ids()[l].empty()) continue;
    for (int t : net.top_ids()[l]) alias[blobs[t]->data().get()] = block(net.bottom_ids()[l][0]);
  }

  std::map<const SyncedMemory*, int> writer;
  UnionFind uf(num_layers);
  for (int l = 0; l < num_layers; ++l) {
    for (int t : net.top_ids()[l]) {
      const SyncedMemory* mem = block(t);
      auto it = writer.find(mem);
      if (it == writer.end()) {
        writer[mem] = l;
      } else {
        uf.unite(l, it->second);
      }
    }
  }
  auto writer_of_blob = [&](int blob_id) {
    auto it = writer.find(block(blob_id));
    return it == writer.end() ? -1 : it->second;  // -1: a net input blob, written by no layer
  };

  // Groups must be ordered so that every edge goes forward. Fusing can break that (an in-place layer that
  // also reads a value computed from the memory it overwrites); such a cycle is closed by fusing every group
  // between the two ends, until none is left.
  for (bool changed = true; changed;) {
    changed = false;
    for (int c = 0; c < num_layers && !changed; ++c) {
      for (int b : net.bottom_ids()[c]) {
        const int w = writer_of_blob(b);
        if (w < 0) continue;
        const int gw = uf.find(w), gc = uf.find(c);
        if (gw > gc) {  // roots are first layers, so the producer's group starts after its consumer's
          for (int l = gc; l <= num_layers - 1; ++l) {
            const int r = uf.find(l);
            if (r >= gc && r <= gw) uf.unite(l, gc);
          }
          changed = true;
          break;
        }
      }
    }
  }

  // Group roots in layer order, and the edges between groups.
  std::vector<int> roots;
  std::map<int, std::vector<int>> members;
  for (int l = 0; l < num_layers; ++l) {
    const int r = uf.find(l);
    if (members[r].empty()) roots.push_back(r);
    members[r].push_back(l);
  }
  std::map<int, std::vector<int>> pred_roots;
  for (int c = 0; c < num_layers; ++c) {
    for (int b : net.bottom_ids()[c]) {
      const int w = writer_of_blob(b);
      if (w >= 0 && uf.find(w) != uf.find(c)) pred_roots[uf.find(c)].push_back(uf.find(w));
    }
  }

  // Sources: groups with no predecessor that hold a layer without bottoms (Data, Input).
  RecomputeGraph g;
  std::map<int, int> node_of_root;
  std::vector<bool> pinned(num_layers, false);
  for (int r : roots) {
    bool source = pred_roots[r].empty();
    bool has_bottomless = false;
    for (int l : members[r]) has_bottomless |= net.bottom_ids()[l].empty();
    if (source && has_bottomless) {
      pinned[r] = true;
      for (int l : members[r]) g.source_layers.push_back(l);
      continue;
    }
    node_of_root[r] = g.size();
    RecomputeGraph::Node n;
    n.layers = members[r];
    n.name = net.layer_names()[r];
    if (n.layers.size() > 1) n.name += "+" + std::to_string(n.layers.size() - 1);
    n.needed_in_backward = false;
    for (int l : n.layers) n.flops += layer_flops(*layers[l], net.bottom_vecs()[l], net.top_vecs()[l]);
    g.nodes.push_back(std::move(n));
  }

  // Bytes: each block of memory once, charged to the group of its writer; blobs that alias it are listed too.
  // The same for gradients, whose blocks alias only where a layer shares its bottom's diff (Flatten, Reshape).
  const std::vector<bool> is_output = PinnedBlobs(net);
  const std::vector<std::vector<int>> touch = GradientLayers(net);
  Blocks16Bit<Dtype> in_16bit(net, touch, block);
  std::map<const SyncedMemory*, bool> counted;
  std::map<const SyncedMemory*, std::pair<int, int>> gradient_of;  // diff block -> (node, gradient index)
  for (int b = 0; b < static_cast<int>(blobs.size()); ++b) {
    const SyncedMemory* mem = block(b);
    const int w = writer_of_blob(b);
    const size_t count = static_cast<size_t>(blobs[b]->count());
    const size_t bytes = count * element_bytes<Dtype>(w >= 0 && in_16bit.data(mem));  // a net input is the caller's float
    const bool first = !counted[mem];
    counted[mem] = true;
    const SyncedMemory* diff = blobs[b]->diff().get();
    const bool has_diff = !touch[b].empty() || is_output[b];
    const bool first_diff = has_diff && !counted[diff];
    if (has_diff) counted[diff] = true;
    const size_t diff_bytes = has_diff ? count * element_bytes<Dtype>(in_16bit.diff(b)) : 0;
    if (w < 0 || pinned[uf.find(w)] || is_output[b]) {
      // Sources and the net's outputs (losses, accuracies, read after backward) are never freed.
      if (first) g.source_bytes += bytes;
      if (first_diff) g.source_bytes += diff_bytes;
      if (w >= 0 && !pinned[uf.find(w)]) g.nodes[node_of_root[uf.find(w)]].blobs.push_back(b);
      continue;
    }
    const int v = node_of_root[uf.find(w)];
    RecomputeGraph::Node& n = g.nodes[v];
    n.blobs.push_back(b);
    if (first) n.bytes += bytes;
    if (!has_diff) continue;
    if (first_diff) {
      gradient_of[diff] = {v, static_cast<int>(n.gradients.size())};
      n.gradients.push_back({diff_bytes, {}});
    }
    // A gradient shared with another blob (Flatten's top and bottom): every layer touching either counts.
    auto it = gradient_of.find(diff);
    if (it == gradient_of.end()) continue;  // shared with a pinned blob's, held anyway
    auto& layers_touching = g.nodes[it->second.first].gradients[it->second.second].layers;
    layers_touching.insert(layers_touching.end(), touch[b].begin(), touch[b].end());
  }
  for (RecomputeGraph::Node& n : g.nodes) {
    for (auto& gr : n.gradients) {
      std::sort(gr.layers.begin(), gr.layers.end());
      gr.layers.erase(std::unique(gr.layers.begin(), gr.layers.end()), gr.layers.end());
    }
  }
  g.node_of_layer.assign(num_layers, -1);
  for (int v = 0; v < g.size(); ++v)
    for (int l : g.nodes[v].layers) g.node_of_layer[l] = v;
  for (RecomputeGraph::Node& n : g.nodes) {
    for (int l : n.layers) {
      // An absorbed layer's forward never runs, so it saves nothing (a Scale in BatchNorm: BatchNorm's state).
      if (layers[l]->absorbed()) continue;
      const std::vector<const Blob<Dtype>*> saved_16bit =
          stores_16bit(*layers[l]) ? layers[l]->SavedIn16BitOnGpu() : std::vector<const Blob<Dtype>*>{};
      size_t saved = 0;
      for (const Blob<Dtype>* s : layers[l]->SavedActivations()) {
        const bool half = std::find(saved_16bit.begin(), saved_16bit.end(), s) != saved_16bit.end();
        saved += static_cast<size_t>(s->count()) * element_bytes<Dtype>(half);
      }
      if (saved == 0) continue;
      n.layer_states.push_back({l, saved});
      // Its backward reads that state: the node must be there (kept or recomputed) when the layer's turn comes.
      if (net.layer_need_backward(l)) n.needed_in_backward = n.backward_reads_state = true;
    }
  }

  for (auto& kv : pred_roots) {
    if (pinned[kv.first]) continue;
    for (int p : kv.second)
      if (!pinned[p]) g.nodes[node_of_root[p]].succs.push_back(node_of_root[kv.first]);
  }

  // What backward reads: a consumer's bottoms, or a layer's own tops.
  auto mark = [&](int blob_id) {
    const int w = writer_of_blob(blob_id);
    if (w >= 0 && !pinned[uf.find(w)]) g.nodes[node_of_root[uf.find(w)]].needed_in_backward = true;
  };
  for (int l = 0; l < num_layers; ++l) {
    if (!net.layer_need_backward(l)) continue;
    if (layers[l]->BackwardNeedsBottomData())
      for (int b : net.bottom_ids()[l]) mark(b);
    if (layers[l]->BackwardNeedsTopData())
      for (int t : net.top_ids()[l]) mark(t);
  }

  // A value no backward reads is dead after its last reader's forward, unless one of its blobs is pinned.
  for (int l = 0; l < num_layers; ++l) {
    for (int b : net.bottom_ids()[l]) {
      const int w = writer_of_blob(b);
      if (w >= 0 && !pinned[uf.find(w)]) {
        int& last = g.nodes[node_of_root[uf.find(w)]].last_reader;
        last = std::max(last, l);
      }
    }
  }
  for (RecomputeGraph::Node& n : g.nodes) {
    n.frees_after_last_reader = !n.needed_in_backward && n.last_reader >= 0 &&
                                std::none_of(n.blobs.begin(), n.blobs.end(), [&](int b) { return is_output[b]; });
  }
  g.Finish();
  return g;
}

template RecomputeGraph ExtractGraph<float>(const Net<float>& net);
template RecomputeGraph ExtractGraph<double>(const Net<double>& net);
template std::vector<bool> PinnedBlobs<float>(const Net<float>& net);
template std::vector<bool> PinnedBlobs<double>(const Net<double>& net);
template std::vector<std::vector<int>> GradientLayers<float>(const Net<float>& net);
template std::vector<std::vector<int>> GradientLayers<double>(const Net<double>& net);

}  // namespace strata
