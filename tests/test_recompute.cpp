// Recomputation planners: graph extraction from a Net (in-place and aliasing layers fused, sources pinned),
// the DP against brute force over every chain of lower sets on small random DAGs, Chen's sqrt(n) on a
// chain, budgets, and the error for a budget no plan meets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "strata/layer_factory.hpp"
#include "strata/math_functions.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/recompute/executor.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"
#include "strata/recompute/schedule.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// A DAG on n nodes in topological order with integer sizes and costs (so sums compare exactly).
RecomputeGraph RandomDag(std::mt19937* rng, int n, double edge_p) {
  std::uniform_int_distribution<int> val(1, 50);
  std::bernoulli_distribution edge(edge_p), needed(0.7);
  std::vector<size_t> bytes;
  std::vector<double> flops;
  std::vector<bool> need;
  std::vector<std::pair<int, int>> edges;
  for (int v = 0; v < n; ++v) {
    bytes.push_back(val(*rng));
    flops.push_back(val(*rng));
    need.push_back(needed(*rng));
    for (int u = 0; u < v; ++u)
      if (edge(*rng)) edges.push_back({u, v});
  }
  return RecomputeGraph::FromEdges(bytes, flops, edges, need);
}

RecomputeGraph Chain(int n, size_t bytes = 100, double flops = 10) {
  std::vector<std::pair<int, int>> edges;
  for (int v = 1; v < n; ++v) edges.push_back({v - 1, v});
  return RecomputeGraph::FromEdges(std::vector<size_t>(n, bytes), std::vector<double>(n, flops), edges);
}

// Peak and cost of every chain of lower sets from the empty set to all nodes, by plain recursion over
// bitmasks (independent of the planner's enumeration and DP).
std::vector<RecomputePlan> AllChains(const RecomputeGraph& g) {
  const int n = g.size();
  std::vector<unsigned> lower;
  for (unsigned m = 0; m < (1u << n); ++m) {
    bool closed = true;
    for (int v = 0; v < n && closed; ++v)
      if (m >> v & 1)
        for (int p : g.nodes[v].preds) closed &= (m >> p & 1) != 0;
    if (closed) lower.push_back(m);
  }
  std::vector<RecomputePlan> plans;
  std::vector<std::vector<int>> segs;
  std::function<void(unsigned)> rec = [&](unsigned cur) {
    if (cur == (1u << n) - 1) {
      plans.push_back(EvaluateSegments(g, segs, "brute"));
      return;
    }
    for (unsigned next : lower) {
      if ((next & cur) != cur || next == cur) continue;
      std::vector<int> seg;
      for (int v = 0; v < n; ++v)
        if ((next & ~cur) >> v & 1) seg.push_back(v);
      segs.push_back(seg);
      rec(next);
      segs.pop_back();
    }
  };
  rec(0);
  return plans;
}

TEST(Recompute, ExactDpMatchesBruteForceOnRandomDags) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 2 + trial % 6;  // up to 7 nodes: at most 47293 chains
    const RecomputeGraph g = RandomDag(&rng, n, 0.2 + 0.1 * (trial % 5));
    const std::vector<RecomputePlan> chains = AllChains(g);
    LowerSetPlanner dp(g);
    ASSERT_TRUE(dp.exact());

    size_t brute_min_peak = std::numeric_limits<size_t>::max();
    for (const auto& c : chains) brute_min_peak = std::min(brute_min_peak, c.peak_bytes);
    ASSERT_EQ(dp.MinFeasibleBytes(), brute_min_peak) << "trial " << trial;

    const size_t total = g.total_bytes();
    for (int k = 0; k <= 6; ++k) {
      const size_t budget = brute_min_peak + (total - brute_min_peak) * k / 6;
      double brute_cost = std::numeric_limits<double>::infinity();
      for (const auto& c : chains)
        if (c.peak_bytes <= budget) brute_cost = std::min(brute_cost, c.recompute_flops);
      const RecomputePlan p = dp.Plan(budget);
      EXPECT_EQ(p.recompute_flops, brute_cost) << "trial " << trial << " budget " << budget;
      EXPECT_LE(p.peak_bytes, budget);
      // The approximate family never beats the exact optimum, and still meets the budget.
      LowerSetPlanner approx(g, 1);
      ASSERT_FALSE(approx.exact());
      const RecomputePlan a = approx.Plan(std::max(budget, approx.MinFeasibleBytes()));
      EXPECT_LE(a.peak_bytes, std::max(budget, approx.MinFeasibleBytes()));
      if (a.peak_bytes <= budget) {
        EXPECT_GE(a.recompute_flops, p.recompute_flops);
      }
    }
  }
}

TEST(Recompute, SqrtOnChainGivesSqrtSegments) {
  for (int n : {16, 50, 100}) {
    const RecomputeGraph g = Chain(n);
    const RecomputePlan p = SqrtPlan(g);
    const int s = static_cast<int>(std::ceil(std::sqrt(n)));
    EXPECT_EQ(static_cast<int>(p.segments.size()), s);
    for (const auto& seg : p.segments) EXPECT_LE(std::abs(static_cast<int>(seg.size()) - n / s), 1);
    // Kept: one boundary per segment but the last, plus the last segment whole; every node but those of the
    // last segment and the boundaries recomputed once.
    const int last = static_cast<int>(p.segments.back().size());
    EXPECT_EQ(static_cast<int>(p.kept.size()), s - 1 + last);
    EXPECT_DOUBLE_EQ(p.recompute_flops, 10.0 * (n - last - (s - 1)));
    // O(sqrt n) memory: about 2 sqrt(n) values at the peak instead of n.
    EXPECT_LE(p.peak_bytes, 100u * (2 * s + 1));
    EXPECT_EQ(StoreAllPlan(g).peak_bytes, 100u * n);
  }
}

TEST(Recompute, BudgetsRespectedAndDpNoWorseThanSqrt) {
  const RecomputeGraph g = Chain(40, 100, 10);
  LowerSetPlanner dp(g);
  EXPECT_TRUE(dp.exact());  // a chain of n has n + 1 lower sets
  const RecomputePlan sq = SqrtPlan(g);
  double previous = std::numeric_limits<double>::infinity();
  for (size_t budget = dp.MinFeasibleBytes(); budget <= g.total_bytes(); budget += 100) {
    const RecomputePlan p = dp.Plan(budget);
    EXPECT_LE(p.peak_bytes, budget);
    EXPECT_LE(p.recompute_flops, previous);  // more memory never costs more time
    previous = p.recompute_flops;
    if (sq.peak_bytes <= budget) {
      EXPECT_LE(p.recompute_flops, sq.recompute_flops);
    }
  }
  EXPECT_EQ(previous, 0.0);  // at the store-all budget nothing is recomputed
  EXPECT_EQ(dp.Plan(g.total_bytes()).segments.size(), 1u);

  // A wide graph with more lower sets than the cap: the approximate family still holds sqrt(n)'s chain.
  std::mt19937 rng(3);
  const RecomputeGraph wide = RandomDag(&rng, 60, 0.05);
  LowerSetPlanner approx(wide, 500);
  EXPECT_FALSE(approx.exact());
  const RecomputePlan wsq = SqrtPlan(wide);
  const RecomputePlan wp = approx.Plan(wsq.peak_bytes);
  EXPECT_LE(wp.peak_bytes, wsq.peak_bytes);
  EXPECT_LE(wp.recompute_flops, wsq.recompute_flops);
  EXPECT_LE(approx.MinFeasibleBytes(), wsq.peak_bytes);
}

TEST(Recompute, InfeasibleBudgetNamesTheSmallestFeasible) {
  const RecomputeGraph g = Chain(9);
  LowerSetPlanner dp(g);
  const size_t min_bytes = dp.MinFeasibleBytes();
  EXPECT_LT(min_bytes, g.total_bytes());
  EXPECT_NO_THROW(dp.Plan(min_bytes));
  try {
    dp.Plan(min_bytes - 1);
    FAIL() << "a budget below the smallest feasible one must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("smallest feasible budget is " + std::to_string(min_bytes) + " bytes"),
              std::string::npos)
        << e.what();
  }
  // The memory-centric plan reaches exactly that peak.
  EXPECT_EQ(dp.MinMemoryPlan().peak_bytes, min_bytes);
}

TEST(Recompute, PeakCountsGradientsAndSavedStateAsTheExecutorFreesThem) {
  // A chain a -> b -> c, 10 data bytes each, 10 gradient bytes each, b keeps 5 bytes of state.
  const RecomputeGraph g = RecomputeGraph::FromEdges({10, 10, 10}, {1, 1, 1}, {{0, 1}, {1, 2}}, {}, {0, 5, 0},
                                                     {10, 10, 10});
  // Store-all: after forward 35 bytes; c's backward reads its own gradient and writes b's: 55. Then c goes
  // (20), and b's backward adds a's gradient to what is left: 35 + 10 - 20 = 45 < 55.
  EXPECT_EQ(StoreAllPlan(g).peak_bytes, 55u);
  // {a}, {b, c}: a is kept (10); the second segment's backward holds b, c and their gradients (45 over it)
  // before a's gradient appears at b's turn, so 55 again: splitting off a saves nothing.
  EXPECT_EQ(EvaluateSegments(g, {{0}, {1, 2}}, "a|bc").peak_bytes, 55u);
  // {a, b}, {c} keeping b's state: b is kept with it (15). c's segment: 10 + c's and b's gradients = 30 over
  // it, 45. The first segment's backward recomputes a and holds a, b, b's gradient (written by c), then a's: 45.
  const RecomputePlan ab_c = EvaluateSegments(g, {{0, 1}, {2}}, "ab|c", {true});
  EXPECT_EQ(ab_c.peak_bytes, 45u);
  EXPECT_EQ(ab_c.recompute, (std::vector<std::vector<int>>{{0}, {}}));
  // Without b's state only b's data is kept (10), so c's segment peaks at 40; the first segment recomputes b
  // too (after a) for its state and holds a, b, b's state and gradient, then a's gradient at b's turn: 45.
  const RecomputePlan ab_c_drop = EvaluateSegments(g, {{0, 1}, {2}}, "ab|c");
  EXPECT_EQ(ab_c_drop.recompute, (std::vector<std::vector<int>>{{0, 1}, {}}));
  EXPECT_EQ(ab_c_drop.peak_bytes, 45u);
  EXPECT_GT(ab_c_drop.recompute_flops, ab_c.recompute_flops);
  LowerSetPlanner dp(g);
  EXPECT_EQ(dp.MinFeasibleBytes(), 45u);
  // At 45 bytes the DP takes the cheaper of the two.
  EXPECT_EQ(dp.Plan(45).recompute_flops, ab_c.recompute_flops);
}

const char* kSmallNet = R"(
name: "small"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" } } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "conv2" type: "Convolution" bottom: "c1" top: "c2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" } } }
layer { name: "sum" type: "Eltwise" bottom: "c1" bottom: "c2" top: "s" }
layer { name: "pool" type: "Pooling" bottom: "s" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "p" top: "f"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" }
)";

TEST(Recompute, ExtractGraphFusesInPlaceAndAliasingLayers) {
  NetParameter param;
  ReadProtoFromTextString(kSmallNet, &param, "small.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Net<float> net(param);
  const RecomputeGraph g = ExtractGraph(net);
  // Sources: both Input layers, pinned.
  EXPECT_EQ(g.source_layers.size(), 2u);
  EXPECT_EQ(g.source_bytes, (2 * 64 + 2 + 1 + 1) * sizeof(float));  // x, y, the loss and its gradient (weight)
  // conv1 + relu1 (in place) + the Split that feeds c1 to conv2 and sum are one node.
  ASSERT_GE(g.size(), 1);
  EXPECT_EQ(g.nodes[0].name.substr(0, 5), "conv1");
  bool has_relu = false;
  for (int l : g.nodes[0].layers) has_relu |= net.layer_names()[l] == "relu1";
  EXPECT_TRUE(has_relu);
  EXPECT_EQ(g.nodes[0].bytes, 2u * 4 * 64 * sizeof(float));  // the split's tops alias c1: not counted again
  // Their gradients do not alias: c1's and each split top's are separate buffers, c1's touched by conv1 and
  // the split, each split top's by the split and its reader.
  ASSERT_EQ(g.nodes[0].gradients.size(), 3u);
  for (const auto& gr : g.nodes[0].gradients) EXPECT_EQ(gr.bytes, 2u * 4 * 64 * sizeof(float));
  EXPECT_EQ(g.nodes[0].gradients[0].layers.size(), 3u);  // conv1, relu1 (in place), the split
  EXPECT_EQ(g.nodes[0].gradients[1].layers.size(), 2u);
  EXPECT_EQ(g.nodes[0].state_bytes(), 0u);
  // Max pooling keeps its argmax for backward and SoftmaxWithLoss its probabilities: saved state, which also
  // makes those nodes read by backward.
  const RecomputeGraph::Node& pool = g.nodes[g.size() - 3];
  const RecomputeGraph::Node& loss = g.nodes[g.size() - 1];
  EXPECT_EQ(pool.name, "pool");
  EXPECT_EQ(pool.state_bytes(), 2u * 4 * 16 * sizeof(float));
  EXPECT_TRUE(pool.needed_in_backward);
  EXPECT_EQ(loss.state_bytes(), 2u * 3 * sizeof(float));
  // Every layer is in exactly one node or a source; store-all needs every blob's distinct memory.
  size_t layers = g.source_layers.size();
  for (const auto& n : g.nodes) layers += n.layers.size();
  EXPECT_EQ(static_cast<int>(layers), net.num_layers());
  EXPECT_EQ(StoreAllPlan(g).peak_bytes, g.total_bytes());
  // Edges go forward; conv1's node feeds conv2 and sum.
  for (int v = 0; v < g.size(); ++v)
    for (int s : g.nodes[v].succs) EXPECT_GT(s, v);
  EXPECT_GE(g.nodes[0].succs.size(), 2u);
  // The convolutions dominate the FLOP estimate: 2 x 2*4*64 outputs x (1*9 or 4*9) terms.
  EXPECT_GT(g.nodes[0].flops, 2.0 * 2 * 4 * 64 * 9);
  // Every planner gives a valid plan on it.
  LowerSetPlanner dp(g);
  EXPECT_TRUE(dp.exact());
  EXPECT_LE(dp.Plan(g.total_bytes()).peak_bytes, g.total_bytes());
  EXPECT_LE(dp.MinFeasibleBytes(), SqrtPlan(g).peak_bytes);
}

// A per-element layer for the byte counts of a GPU bfloat16 pass: "Bf16Stub" says it computes in bfloat16 and keeps
// its saved copy of the input in bfloat16, "FloatStub" computes in float. Neither runs: the graph reads shapes.
template <typename Dtype>
class StubLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  StubLayer(const LayerParameter& p, bool bf16) : Layer<Dtype>(p), bf16_(bf16) {}
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {
    top[0]->ReshapeLike(*bottom[0]);
    saved_.ReshapeLike(*bottom[0]);
  }
  const char* type() const override { return bf16_ ? "Bf16Stub" : "FloatStub"; }
  bool ComputesIn16Bit() const override { return bf16_; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&saved_}; }
  std::vector<const Blob<Dtype>*> SavedIn16BitOnGpu() const override { return {&saved_}; }

 protected:
  void Forward_cpu(const BlobVec&, const BlobVec&) override { FAIL() << "the graph runs no layer"; }
  void Backward_cpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {
    FAIL() << "the graph runs no layer";
  }

 private:
  bool bf16_;
  Blob<Dtype> saved_;
};
template <typename Dtype>
std::shared_ptr<Layer<Dtype>> CreateBf16Stub(const LayerParameter& p) {
  return std::make_shared<StubLayer<Dtype>>(p, true);
}
template <typename Dtype>
std::shared_ptr<Layer<Dtype>> CreateFloatStub(const LayerParameter& p) {
  return std::make_shared<StubLayer<Dtype>>(p, false);
}
REGISTER_LAYER_CREATOR(Bf16Stub, CreateBf16Stub);
REGISTER_LAYER_CREATOR(FloatStub, CreateFloatStub);

// a feeds two bfloat16 layers (through a Split), b a float one, c a Flatten and then a bfloat16 layer.
const char* kBf16StubNet = R"(
name: "bf16_bytes"
force_backward: true
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "a" type: "Bf16Stub" bottom: "x" top: "a" }
layer { name: "b" type: "Bf16Stub" bottom: "a" top: "b" }
layer { name: "c" type: "Bf16Stub" bottom: "a" top: "c" }
layer { name: "d" type: "FloatStub" bottom: "b" top: "d" }
layer { name: "flat" type: "Flatten" bottom: "c" top: "f" }
layer { name: "e" type: "Bf16Stub" bottom: "f" top: "e" }
)";

// The node holding a layer, by the layer's name.
const RecomputeGraph::Node& NodeOf(const RecomputeGraph& g, const Net<float>& net, const std::string& layer) {
  const auto& names = net.layer_names();
  const int l = static_cast<int>(std::find(names.begin(), names.end(), layer) - names.begin());
  EXPECT_LT(l, net.num_layers()) << layer;
  return g.nodes[g.node_of_layer[l]];
}

TEST(Recompute, CountsBlocksOnlyBfloat16LayersTouchInBf16OnTheGpu) {
  NetParameter param;
  ReadProtoFromTextString(kBf16StubNet, &param, "bf16_bytes.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  constexpr size_t kCount = 2 * 3 * 4 * 4;
  // GPU mode is only the flag here: building the net and its graph touches no memory, so no device is needed.
  auto graph_in = [&](Strata::Mode mode) {
    Strata::set_mode(mode);
    Net<float> net(param);
    RecomputeGraph g = ExtractGraph(net);
    Strata::set_mode(Strata::CPU);
    std::map<std::string, RecomputeGraph::Node> nodes;
    for (const char* l : {"a", "b", "c", "d", "e"}) nodes[l] = NodeOf(g, net, l);
    return std::make_pair(g.source_bytes, nodes);
  };
  const auto [cpu_sources, cpu] = graph_in(Strata::CPU);
  const auto [gpu_sources, gpu] = graph_in(Strata::GPU);
  // On the CPU every value, gradient and saved copy is float (oneDNN's bfloat16 is inside its multiplications). d's
  // and e's values are the net's outputs, counted with the sources.
  for (const auto& [name, n] : cpu) {
    if (name != "d" && name != "e") {
      EXPECT_EQ(n.bytes, kCount * sizeof(float)) << name;
    }
    EXPECT_EQ(n.state_bytes(), kCount * sizeof(float)) << name;
    for (const auto& gr : n.gradients) EXPECT_EQ(gr.bytes, kCount * sizeof(float)) << name;
  }
  // a: written by a, read by b and c (through the Split, which touches no value): bfloat16. Its gradient: the
  // Split sums b's and c's bottom gradients, both bfloat16, so it is too.
  EXPECT_EQ(gpu.at("a").bytes, kCount * 2);
  ASSERT_EQ(gpu.at("a").gradients.size(), 3u);  // a's, and each Split top's
  for (const auto& gr : gpu.at("a").gradients) EXPECT_EQ(gr.bytes, kCount * 2);
  // b: read by the float d, which converts it to float in place (and writes its gradient in float).
  EXPECT_EQ(gpu.at("b").bytes, kCount * sizeof(float));
  ASSERT_EQ(gpu.at("b").gradients.size(), 1u);
  EXPECT_EQ(gpu.at("b").gradients[0].bytes, kCount * sizeof(float));
  // c: read through the Flatten (an alias) by e: bfloat16, and its gradient, shared with the Flatten's top, too.
  EXPECT_EQ(gpu.at("c").bytes, kCount * 2);
  ASSERT_EQ(gpu.at("c").gradients.size(), 1u);
  EXPECT_EQ(gpu.at("c").gradients[0].bytes, kCount * 2);
  // A bfloat16 layer's saved copy is bfloat16, a float layer's float.
  for (const char* l : {"a", "b", "c", "e"}) EXPECT_EQ(gpu.at(l).state_bytes(), kCount * 2) << l;
  EXPECT_EQ(gpu.at("d").state_bytes(), kCount * sizeof(float));
  // The outputs d (float) and e (bfloat16, but the net's output, read by the caller) and the input x are pinned;
  // e's data and gradient are what changes between the two.
  EXPECT_EQ(cpu_sources - gpu_sources, 2 * kCount * 2);
}

// conv -> BatchNorm -> Scale -> ReLU (in place) feeding a branch with Dropout (in place) and a sum: fusing (the
// Scale's saved input goes unused inside BatchNorm), random replay, statistics and a skip connection in one net.
const char* kExecNet = R"(
name: "exec"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 4 dim: 2 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "bn1" type: "BatchNorm" bottom: "c1" top: "c1" }
layer { name: "scale1" type: "Scale" bottom: "c1" top: "c1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "conv2" type: "Convolution" bottom: "c1" top: "c2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "drop" type: "Dropout" bottom: "c2" top: "c2" dropout_param { dropout_ratio: 0.5 } }
layer { name: "conv3" type: "Convolution" bottom: "c2" top: "c3"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu3" type: "ReLU" bottom: "c3" top: "c3" }
layer { name: "sum" type: "Eltwise" bottom: "c1" bottom: "c3" top: "s" }
layer { name: "conv5" type: "Convolution" bottom: "s" top: "c5"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu5" type: "ReLU" bottom: "c5" top: "c5" }
layer { name: "conv6" type: "Convolution" bottom: "c5" top: "c6"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "tanh6" type: "TanH" bottom: "c6" top: "c6" }
layer { name: "conv7" type: "Convolution" bottom: "c6" top: "c7"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu7" type: "ReLU" bottom: "c7" top: "c7" }
layer { name: "pool" type: "Pooling" bottom: "c7" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv4" type: "Convolution" bottom: "p" top: "c4"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "sig4" type: "Sigmoid" bottom: "c4" top: "c4" }
layer { name: "fc" type: "InnerProduct" bottom: "c4" top: "f"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" }
)";

struct ExecResult {
  std::vector<std::vector<float>> values;  // per iteration: loss, every param's diff; then every param's data
  std::vector<int> backward_hooks;         // per layer, over all iterations
  size_t peak = 0;                         // measured activation peak of the last iteration
  size_t diff_bytes = 0;                   // gradient buffers held (the plan's peak counts data only)
  RecomputePlan plan;
};

// Three SGD-like iterations (gradients, then data -= diff) under `planner` ("" = no plan).
ExecResult RunExec(const char* net_text, const std::string& planner) {
  NetParameter param;
  ReadProtoFromTextString(net_text, &param, "exec.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Strata::set_random_seed(1234);
  Net<float> net(param);
  ExecResult r;
  const RecomputeGraph g = ExtractGraph(net);
  if (!planner.empty()) {
    LowerSetPlanner dp(g);
    if (planner == "store_all") r.plan = StoreAllPlan(g);
    if (planner == "sqrt") r.plan = SqrtPlan(g);
    if (planner == "dp_memory") r.plan = dp.MinMemoryPlan();
    if (planner == "dp_mid") r.plan = dp.Plan((dp.MinFeasibleBytes() + g.total_bytes()) / 2);
    if (planner == "every_node") r.plan = SqrtPlan(g, g.size());
    InstallRecomputePlan(&net, r.plan);
  }
  r.backward_hooks.assign(net.num_layers(), 0);
  net.add_after_backward_hook([&](int i) { ++r.backward_hooks[i]; });
  for (int it = 0; it < 3; ++it) {
    Blob<float>* x = net.blob_by_name("x").get();
    Blob<float>* y = net.blob_by_name("y").get();
    rng_uniform<float>(x->count(), -1.f, 1.f, x->mutable_cpu_data());
    for (int i = 0; i < y->count(); ++i) y->mutable_cpu_data()[i] = static_cast<float>((i + it) % 3);
    net.ClearParamDiffs();
    if (it == 2) MemoryTracker::reset_peak(MemoryCategory::kActivation);
    const float loss = net.ForwardBackward();
    if (it == 2) r.peak = MemoryTracker::peak(MemoryCategory::kActivation);
    std::vector<float> v = {loss};
    for (const auto& p : net.params()) v.insert(v.end(), p->cpu_diff(), p->cpu_diff() + p->count());
    r.values.push_back(v);
    for (Blob<float>* p : net.learnable_params())
      cpu_axpy(p->count(), -0.1f, p->cpu_diff(), p->mutable_cpu_data());
  }
  std::set<const SyncedMemory*> diffs;
  for (const auto& b : net.blobs())
    if (diffs.insert(b->diff().get()).second) r.diff_bytes += b->diff()->resident_bytes();
  if (planner.empty()) r.plan = StoreAllPlan(g);
  std::vector<float> data;
  for (const auto& p : net.params()) data.insert(data.end(), p->cpu_data(), p->cpu_data() + p->count());
  r.values.push_back(data);
  return r;
}

void ExpectSameBits(const ExecResult& r, const ExecResult& base, const std::string& planner) {
  ASSERT_EQ(r.values.size(), base.values.size());
  for (size_t k = 0; k < base.values.size(); ++k) {
    ASSERT_EQ(r.values[k].size(), base.values[k].size());
    EXPECT_EQ(std::memcmp(r.values[k].data(), base.values[k].data(), base.values[k].size() * sizeof(float)), 0)
        << planner << ": " << (k + 1 < base.values.size() ? "iteration " + std::to_string(k) : "final weights")
        << " differs";
  }
  // Hooks fire once per layer per iteration, from the real backward only.
  for (int n : r.backward_hooks) EXPECT_EQ(n, 3) << planner;
}

// `saves`: whether the plans must measure less than store-all. On LeNet they cannot: its peak is conv1's
// output with its gradient and pooling mask in conv1's own backward, which no plan avoids.
void ExpectBitIdentical(const char* net_text,
                        const std::vector<std::string>& planners = {"sqrt", "dp_memory", "dp_mid"},
                        bool saves = true) {
  const ExecResult base = RunExec(net_text, "");
  // Without a plan the net holds every value, saved state and gradient.
  EXPECT_GE(base.peak, base.plan.peak_bytes);
  // Store-all through the executor frees gradients and saved state as backward passes them.
  const ExecResult all = RunExec(net_text, "store_all");
  ExpectSameBits(all, base, "store_all");
  EXPECT_LT(all.peak, base.peak);
  EXPECT_EQ(all.peak, all.plan.peak_bytes);
  for (const std::string& planner : planners) {
    const ExecResult r = RunExec(net_text, planner);
    ASSERT_GT(r.plan.segments.size(), 1u) << planner;
    EXPECT_GT(r.plan.recompute_flops, 0) << planner;
    ExpectSameBits(r, base, planner);
    // Freed activations show in the measured peak, which is the predicted one to the byte: the prediction
    // counts data, gradients and saved state as the executor makes and frees them.
    if (saves) {
      EXPECT_LT(r.peak, all.peak) << planner << " plan peak " << r.plan.peak_bytes;
    }
    EXPECT_EQ(r.peak, r.plan.peak_bytes) << planner;
  }
}

TEST(RecomputeExecutor, GradientsBitIdenticalWithAndWithoutRecomputation) { ExpectBitIdentical(kExecNet); }

// GoogLeNet-style branches joined by Concat, and a U-Net-style long skip: the first pooled map is
// concatenated with the deepest one, so it is live across the whole net.
const char* kBranchNet = R"(
name: "branches"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 4 dim: 2 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "pool1" type: "Pooling" bottom: "c1" top: "p1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "p1" top: "c2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "tanh2" type: "TanH" bottom: "c2" top: "c2" }
layer { name: "b1" type: "Convolution" bottom: "c2" top: "b1"
        convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "b3" type: "Convolution" bottom: "c2" top: "b3"
        convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "b3_relu" type: "ReLU" bottom: "b3" top: "b3" }
layer { name: "b3_drop" type: "Dropout" bottom: "b3" top: "b3" dropout_param { dropout_ratio: 0.3 } }
layer { name: "bp" type: "Pooling" bottom: "c2" top: "bp" pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "b1" bottom: "b3" bottom: "bp" top: "cat" }
layer { name: "conv3" type: "Convolution" bottom: "cat" top: "c3"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "bn3" type: "BatchNorm" bottom: "c3" top: "c3" }
layer { name: "skip" type: "Concat" bottom: "p1" bottom: "c3" top: "u" }
layer { name: "conv4" type: "Convolution" bottom: "u" top: "c4"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "sig4" type: "Sigmoid" bottom: "c4" top: "c4" }
layer { name: "fc" type: "InnerProduct" bottom: "c4" top: "f"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" }
)";

TEST(RecomputeExecutor, BitIdenticalWithConcatBranchesAndLongSkip) { ExpectBitIdentical(kBranchNet); }

// LeNet (conv, max pool, conv, max pool, two inner products) with Dropout after the first inner product.
const char* kLeNet = R"(
name: "lenet"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 4 dim: 1 dim: 16 dim: 16 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 4 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "c1" top: "p1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "p1" top: "c2"
        convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "pool2" type: "Pooling" bottom: "c2" top: "p2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "p2" top: "ip1"
        inner_product_param { num_output: 20 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "drop1" type: "Dropout" bottom: "ip1" top: "ip1" dropout_param { dropout_ratio: 0.5 } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "y" top: "l" }
)";

TEST(RecomputeExecutor, BitIdenticalOnLeNet) { ExpectBitIdentical(kLeNet, {"sqrt", "every_node"}, false); }

// A U-Net: two levels down (conv, BatchNorm, ReLU; max pooling), up again by nearest upsampling, each decoder
// level concatenated with the encoder level of its resolution (the long skips), Dropout at the bottom, and a
// per-pixel loss.
const char* kUNet = R"(
name: "unet"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 2 dim: 2 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 2 dim: 8 dim: 8 } } }
layer { name: "enc1" type: "Convolution" bottom: "x" top: "e1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "enc1_bn" type: "BatchNorm" bottom: "e1" top: "e1" }
layer { name: "enc1_relu" type: "ReLU" bottom: "e1" top: "e1" }
layer { name: "pool1" type: "Pooling" bottom: "e1" top: "p1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "enc2" type: "Convolution" bottom: "p1" top: "e2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "enc2_relu" type: "ReLU" bottom: "e2" top: "e2" }
layer { name: "pool2" type: "Pooling" bottom: "e2" top: "p2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "mid" type: "Convolution" bottom: "p2" top: "m"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "mid_drop" type: "Dropout" bottom: "m" top: "m" dropout_param { dropout_ratio: 0.3 } }
layer { name: "up2" type: "Upsample" bottom: "m" top: "u2" }
layer { name: "skip2" type: "Concat" bottom: "e2" bottom: "u2" top: "s2" }
layer { name: "dec2" type: "Convolution" bottom: "s2" top: "d2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "dec2_relu" type: "ReLU" bottom: "d2" top: "d2" }
layer { name: "up1" type: "Upsample" bottom: "d2" top: "u1" }
layer { name: "skip1" type: "Concat" bottom: "e1" bottom: "u1" top: "s1" }
layer { name: "dec1" type: "Convolution" bottom: "s1" top: "d1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "dec1_bn" type: "BatchNorm" bottom: "d1" top: "d1" }
layer { name: "dec1_tanh" type: "TanH" bottom: "d1" top: "d1" }
layer { name: "score" type: "Convolution" bottom: "d1" top: "score"
        convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "y" top: "l" }
)";

TEST(RecomputeExecutor, BitIdenticalOnUNet) { ExpectBitIdentical(kUNet); }

// The solver's recompute_param installs the plan on the train net; SGD with momentum then ends with the same
// bits as without it.
std::vector<float> TrainExec(const std::string& recompute) {
  SolverParameter p;
  ReadProtoFromTextString("base_lr: 0.05 momentum: 0.9 lr_policy: 'fixed' max_iter: 3 " + recompute, &p,
                          "solver.prototxt");
  ReadProtoFromTextString(kExecNet, p.mutable_net_param(), "exec.prototxt");
  p.set_snapshot_after_train(false);
  Strata::set_random_seed(99);
  auto solver = SolverRegistry<float>::Create(p);
  // Only Caffe's lifetimes without a plan leave the net's own layer loops in charge.
  EXPECT_EQ(solver->net()->pass_runner() == nullptr, recompute.find("planner") == std::string::npos &&
                                                         p.blob_lifetime() == SolverParameter::KEEP);
  Net<float>* net = solver->net();
  Blob<float>* x = net->blob_by_name("x").get();
  Blob<float>* y = net->blob_by_name("y").get();
  rng_uniform<float>(x->count(), -1.f, 1.f, x->mutable_cpu_data());
  for (int i = 0; i < y->count(); ++i) y->mutable_cpu_data()[i] = static_cast<float>(i % 3);
  solver->Step(3);
  std::vector<float> w;
  for (const auto& b : net->params()) w.insert(w.end(), b->cpu_data(), b->cpu_data() + b->count());
  return w;
}

// A layer's saved state goes after its own backward, not with its node: BatchNorm's normalised input is gone
// before the convolution under it makes its bottom's gradient, which is this net's peak under store-all.
const char* kStateNet = R"(
name: "state"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 4 dim: 2 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 4 } } }
layer { name: "conv_a" type: "Convolution" bottom: "x" top: "a"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "conv_b" type: "Convolution" bottom: "a" top: "b"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "bn_b" type: "BatchNorm" bottom: "b" top: "b" }
layer { name: "relu_b" type: "ReLU" bottom: "b" top: "b" }
layer { name: "fc" type: "InnerProduct" bottom: "b" top: "f"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" }
)";

TEST(RecomputeExecutor, PredictsAStateFreedBeforeTheLayerBelowRuns) {
  const ExecResult all = RunExec(kStateNet, "store_all");
  EXPECT_EQ(all.peak, all.plan.peak_bytes);
}

TEST(RecomputeExecutor, SolverRecomputeParamTrainsBitIdentically) {
  const std::vector<float> base = TrainExec("");
  for (const char* rp : {"blob_lifetime: FREE_AFTER_USE", "recompute_param { planner: 'sqrt' }", "recompute_param { planner: 'dp_memory' }",
                         "recompute_param { planner: 'dp' budget_fraction: 0.8 }"}) {
    const std::vector<float> w = TrainExec(rp);
    ASSERT_EQ(w.size(), base.size());
    EXPECT_EQ(std::memcmp(w.data(), base.data(), w.size() * sizeof(float)), 0) << rp;
  }
  EXPECT_THROW(TrainExec("recompute_param { planner: 'dp' budget_bytes: 1 }"), Error);
  EXPECT_THROW(TrainExec("recompute_param { planner: 'magic' }"), Error);
}

// Values no backward reads: conv1's output (its backward reads its input, Dropout its mask) and conv2's (max
// pooling reads its argmax). The store-all plan frees each once its last reader has run forward; what backward
// reads (the dropped-out map, the pooled one, whose node holds the argmax) stays until its backward.
const char* kUnreadNet = R"(
name: "unread"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 4 dim: 2 dim: 8 dim: 8 } } }
layer { name: "label" type: "Input" top: "y" input_param { shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "drop" type: "Dropout" bottom: "c1" top: "d" dropout_param { dropout_ratio: 0.5 } }
layer { name: "conv2" type: "Convolution" bottom: "d" top: "c2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "pool" type: "Pooling" bottom: "c2" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "p" top: "f"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" }
)";

TEST(RecomputeExecutor, FreesWhatNoBackwardReadsAfterItsLastReader) {
  ExpectBitIdentical(kUnreadNet, {"sqrt"}, false);
  NetParameter param;
  ReadProtoFromTextString(kUnreadNet, &param, "unread.prototxt");
  param.mutable_state()->set_phase(TRAIN);
  Net<float> net(param);
  const RecomputeGraph g = ExtractGraph(net);
  const RecomputeSchedule s = MakeSchedule(net, g, StoreAllPlan(g));
  auto freed_after = [&](const char* layer) {
    std::vector<std::string> names;
    for (int b : s.free_after_layer_forward[net.layer_index(layer)]) names.push_back(net.blob_names()[b]);
    return names;
  };
  EXPECT_EQ(freed_after("drop"), std::vector<std::string>{"c1"});
  EXPECT_EQ(freed_after("pool"), std::vector<std::string>{"c2"});
  for (const char* l : {"conv1", "conv2", "fc", "loss"}) EXPECT_TRUE(freed_after(l).empty()) << l;
  InstallRecomputePlan(&net, StoreAllPlan(g));
  net.Forward();
  for (const char* b : {"c1", "c2"}) EXPECT_EQ(net.blob_by_name(b)->data()->resident_bytes(), 0u) << b;
  for (const char* b : {"d", "p", "f", "l", "x"}) EXPECT_GT(net.blob_by_name(b)->data()->resident_bytes(), 0u) << b;
}

// A plan fits the nets built from the definition it was made for, and no other.
TEST(RecomputeExecutor, InstallRecomputePlanRefusesAnotherNetsPlan) {
  NetParameter exec, lenet;
  ReadProtoFromTextString(kExecNet, &exec, "exec.prototxt");
  ReadProtoFromTextString(kLeNet, &lenet, "lenet.prototxt");
  Net<float> a(exec), a_again(exec), b(lenet);
  const RecomputePlan plan = SqrtPlan(ExtractGraph(a));
  InstallRecomputePlan(&a_again, plan);
  EXPECT_NE(a_again.pass_runner(), nullptr);
  EXPECT_THROW(InstallRecomputePlan(&b, plan), Error);
  EXPECT_EQ(b.pass_runner(), nullptr);
}

}  // namespace
}  // namespace strata
