// The graph the recomputation planners work on (docs/recompute.md): a DAG whose nodes are the smallest units
// that can be kept or recomputed, each with the bytes of the values it produces and its forward cost.
//
// A node is not always one layer. Layers that write into memory another layer produced (in-place ReLU,
// BatchNorm, Dropout on a conv's output) or whose tops only alias their bottoms (Split, Flatten, Reshape,
// a one-input Concat) are fused with the producer of that memory: once the in-place layer has run, the
// producer's value no longer exists, so the two can only be kept or recomputed together. Layers without
// bottoms (Data, Input) are sources: recomputing them would read the next batch, so their values are pinned
// for the whole iteration and counted apart (source_bytes, with the net's outputs) rather than planned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata {

template <typename Dtype>
class Net;

// A set of node ids as a bitset (lower sets of graphs with hundreds of nodes are compared often).
class NodeSet {
 public:
  NodeSet() = default;
  explicit NodeSet(int n) : n_(n), words_((n + 63) / 64, 0) {}
  int universe() const { return n_; }
  bool has(int v) const { return (words_[v >> 6] >> (v & 63)) & 1u; }
  void add(int v) { words_[v >> 6] |= uint64_t{1} << (v & 63); }
  void remove(int v) { words_[v >> 6] &= ~(uint64_t{1} << (v & 63)); }
  int size() const;
  bool subset_of(const NodeSet& o) const;
  NodeSet minus(const NodeSet& o) const;
  std::vector<int> members() const;
  bool operator==(const NodeSet& o) const { return words_ == o.words_; }
  bool operator<(const NodeSet& o) const { return words_ < o.words_; }

 private:
  int n_ = 0;
  std::vector<uint64_t> words_;
};

struct RecomputeGraph {
  struct Node {
    std::string name;          // the first layer's name, "+k" when k more layers are fused into it
    std::vector<int> layers;   // net layer ids, ascending (a graph given by FromEdges: the node's own id)
    std::vector<int> blobs;    // net blob ids whose memory this node owns
    size_t bytes = 0;          // activation data bytes of those blobs
    // What its layers keep from forward for their backward (Layer::SavedActivations), as (layer, bytes) for each
    // layer that saves any: made with the node's data (a kept or recomputed node holds both), each layer's freed
    // after that layer's backward.
    std::vector<std::pair<int, size_t>> layer_states;
    size_t state_bytes() const {
      size_t b = 0;
      for (const auto& s : layer_states) b += s.second;
      return b;
    }
    // Its blobs' gradient buffers (diffs), for the blobs backward writes or reads a gradient of: each one's
    // bytes and the layers whose backward touches it (writes it as a bottom's gradient, reads it as a top's).
    // A gradient exists from the backward of the highest of those layers until the node's first layer's.
    struct Gradient {
      size_t bytes = 0;
      std::vector<int> layers;
    };
    std::vector<Gradient> gradients;
    double flops = 0;          // forward cost estimate of all its layers
    // Whether some backward reads this node's values (BackwardNeedsBottomData of a consumer,
    // BackwardNeedsTopData of its own layers, or saved state of its own layers). A node nobody's backward reads
    // is recomputed only when a node that is read depends on it inside the same segment.
    bool needed_in_backward = true;
    // Whether its own backward reads its saved state. Forward keeps a boundary node's data only; when its
    // state is read, the node's segment recomputes it (from the same inputs, so its data comes out the same).
    bool backward_reads_state = false;
    // The highest layer that reads its values in forward (-1: none, the net's outputs).
    int last_reader = -1;
    // Whether the last segment (kept whole, never recomputed) frees its values once last_reader has run forward:
    // no backward reads them and none of its blobs is pinned.
    bool frees_after_last_reader = false;
    std::vector<int> preds, succs;  // node ids, ascending
  };
  std::vector<Node> nodes;  // in a topological order that follows the net's layer order
  // Bytes held for the whole iteration whatever the plan, added to every plan's peak: the values of
  // Data/Input layers and the net's outputs (read after backward), and their gradients (a loss's gradient
  // holds its loss weight).
  size_t source_bytes = 0;
  std::vector<int> source_layers;
  std::vector<int> node_of_layer;  // per net layer, its node (-1 for sources)

  int size() const { return static_cast<int>(nodes.size()); }
  // Store-all's peak: every node's data and saved state, and the gradients alive at the worst moment of
  // backward, plus source_bytes.
  size_t total_bytes() const;
  // The most a segment V = upper \ lower adds to what earlier segments keep, as the recompute executor frees memory:
  // in forward all of V's data and saved state, freed once the segment is done; in backward, layer by layer
  // from the highest, the data of V's nodes in `live` (kept or recomputed) and their state, a layer's state freed
  // after its backward, the data with its gradients after the backward of the node's first layer, while a
  // gradient appears with the backward of the highest layer that touches it (at the start when a later
  // segment's layer did). Gradients of nodes of `lower` that V's or later backward writes are held throughout.
  // `with_state`: the nodes whose saved state is there in backward (recomputed ones, or all of the last
  // segment), a subset of `live`. `last`: V is the last segment, whose nodes that free after their last reader
  // do so in forward (then walked layer by layer) and are gone in backward.
  size_t SegmentPeak(const NodeSet& lower, const NodeSet& upper, const NodeSet& live,
                     const NodeSet& with_state, bool last) const;
  double forward_flops() const;   // one forward pass over the planned nodes

  // A graph given directly (tests, other front ends): nodes 0..n-1 must already be in topological order
  // (every edge u -> v has u < v).
  // state and diffs, when given, are each node's state_bytes and the bytes of its one gradient buffer, which
  // the node and its successors touch. Node v stands for layer v.
  static RecomputeGraph FromEdges(const std::vector<size_t>& bytes, const std::vector<double>& flops,
                                  const std::vector<std::pair<int, int>>& edges,
                                  const std::vector<bool>& needed_in_backward = {},
                                  const std::vector<size_t>& state = {}, const std::vector<size_t>& diffs = {});
  // Fills preds from succs (or the reverse) and checks the order; used by both constructors.
  void Finish();
};

// The graph of a built Net: values are the net's blobs (data, gradient and saved-state bytes from their current
// shapes), costs a FLOP estimate per layer (2 x MACs for layers with weights, one per element touched otherwise).
template <typename Dtype>
RecomputeGraph ExtractGraph(const Net<Dtype>& net);

// Per net blob: whether it is held for the whole iteration under any plan (the net's outputs and blobs with a
// loss weight), and the layers whose backward touches its gradient (none: it gets no gradient). The graph's
// byte counts and the executor's frees both follow these, so the prediction and what runs cannot drift apart.
template <typename Dtype>
std::vector<bool> PinnedBlobs(const Net<Dtype>& net);
template <typename Dtype>
std::vector<std::vector<int>> GradientLayers(const Net<Dtype>& net);

}  // namespace strata
