#include "strata/recompute/graph.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "strata/common.hpp"
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
  size_t b = source_bytes;
  for (const Node& n : nodes) b += n.bytes;
  return b;
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
                                         const std::vector<bool>& needed_in_backward) {
  STRATA_REQUIRE(bytes.size() == flops.size()) << "recompute graph: " << bytes.size() << " byte counts but "
                                               << flops.size() << " costs";
  RecomputeGraph g;
  g.nodes.resize(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    g.nodes[i].name = "n" + std::to_string(i);
    g.nodes[i].bytes = bytes[i];
    g.nodes[i].flops = flops[i];
    if (!needed_in_backward.empty()) g.nodes[i].needed_in_backward = needed_in_backward[i];
  }
  for (const auto& e : edges) {
    STRATA_REQUIRE(e.first >= 0 && e.first < e.second && e.second < g.size())
        << "recompute graph: edge " << e.first << " -> " << e.second << " is not forward in node order";
    g.nodes[e.first].succs.push_back(e.second);
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
    if (std::string(layers[l]->type()) != "Split" || net.bottom_ids()[l].empty()) continue;
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
  std::vector<bool> is_output(blobs.size(), false);
  for (const Blob<Dtype>* out : net.output_blobs())
    for (size_t b = 0; b < blobs.size(); ++b) is_output[b] = is_output[b] || blobs[b].get() == out;
  std::map<const SyncedMemory*, bool> counted;
  for (int b = 0; b < static_cast<int>(blobs.size()); ++b) {
    const SyncedMemory* mem = block(b);
    const int w = writer_of_blob(b);
    const size_t bytes = static_cast<size_t>(blobs[b]->count()) * sizeof(Dtype);
    const bool first = !counted[mem];
    counted[mem] = true;
    if (w < 0 || pinned[uf.find(w)]) {
      if (first) g.source_bytes += bytes;
      continue;
    }
    RecomputeGraph::Node& n = g.nodes[node_of_root[uf.find(w)]];
    n.blobs.push_back(b);
    // The net's outputs (losses, accuracies) are read after backward, so the executor never frees them.
    if (first && is_output[b]) {
      g.source_bytes += bytes;
    } else if (first) {
      n.bytes += bytes;
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
  g.Finish();
  return g;
}

template RecomputeGraph ExtractGraph<float>(const Net<float>& net);
template RecomputeGraph ExtractGraph<double>(const Net<double>& net);

}  // namespace strata
