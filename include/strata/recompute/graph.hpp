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
    std::vector<int> layers;   // net layer ids, ascending
    std::vector<int> blobs;    // net blob ids whose memory this node owns
    size_t bytes = 0;          // activation data bytes of those blobs
    double flops = 0;          // forward cost estimate of all its layers
    // Whether some backward reads this node's values (BackwardNeedsBottomData of a consumer or
    // BackwardNeedsTopData of its own layers). A node nobody's backward reads is recomputed only when a
    // node that is read depends on it inside the same segment.
    bool needed_in_backward = true;
    std::vector<int> preds, succs;  // node ids, ascending
  };
  std::vector<Node> nodes;  // in a topological order that follows the net's layer order
  // Bytes held for the whole iteration whatever the plan, added to every plan's peak: the values of
  // Data/Input layers and the net's outputs (read after backward).
  size_t source_bytes = 0;
  std::vector<int> source_layers;

  int size() const { return static_cast<int>(nodes.size()); }
  size_t total_bytes() const;     // store-all activation data: source_bytes + every node's bytes
  double forward_flops() const;   // one forward pass over the planned nodes

  // A graph given directly (tests, other front ends): nodes 0..n-1 must already be in topological order
  // (every edge u -> v has u < v).
  static RecomputeGraph FromEdges(const std::vector<size_t>& bytes, const std::vector<double>& flops,
                                  const std::vector<std::pair<int, int>>& edges,
                                  const std::vector<bool>& needed_in_backward = {});
  // Fills preds from succs (or the reverse) and checks the order; used by both constructors.
  void Finish();
};

// The graph of a built Net: values are the net's blobs (data bytes from their current shapes), costs a FLOP
// estimate per layer (2 x MACs for layers with weights, one per element touched otherwise).
template <typename Dtype>
RecomputeGraph ExtractGraph(const Net<Dtype>& net);

}  // namespace strata
