// The scaling model (strata/scale/): allreduce shapes against the seed paper's table 1 and the cost model, the
// simulated iteration against hand-worked timelines, and the text inputs of `strata scale`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "strata/comm/cost_model.hpp"
#include "strata/common.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/net.hpp"
#include "strata/comm/allreduce_shape.hpp"
#include "strata/scale/iteration_model.hpp"
#include "strata/scale/machine.hpp"
#include "strata/scale/scale_inputs.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

constexpr double kM = 1 << 20;

bool is_pow2(int n) { return (n & (n - 1)) == 0; }

TEST(AllreduceShape, PowersOfTwoAreTheSeedPapersTable1) {
  for (int n = 2; n <= 64; n *= 2) {
    const double lg = std::log2(n);
    const AllreduceShape brb = ShapeAllreduce("brb", n, kM);
    EXPECT_EQ(brb.num_phases(), 2 * lg);
    EXPECT_DOUBLE_EQ(brb.rank_link_bytes(), 2 * kM * lg);
    EXPECT_DOUBLE_EQ(brb.rank_sum_bytes(), kM * lg);
    EXPECT_DOUBLE_EQ(brb.total_sent_bytes, 2 * kM * (n - 1));
    EXPECT_DOUBLE_EQ(brb.total_sum_bytes, kM * (n - 1));

    const AllreduceShape brd = ShapeAllreduce("brd", n, kM);
    EXPECT_EQ(brd.num_phases(), lg);
    EXPECT_DOUBLE_EQ(brd.rank_link_bytes(), kM * lg);
    EXPECT_DOUBLE_EQ(brd.rank_sum_bytes(), kM * lg);
    EXPECT_DOUBLE_EQ(brd.total_sent_bytes, kM * lg * n);
    EXPECT_DOUBLE_EQ(brd.total_sum_bytes, kM * lg * n);

    const AllreduceShape vhd = ShapeAllreduce("vhd", n, kM);
    EXPECT_EQ(vhd.num_phases(), 2 * lg);
    EXPECT_DOUBLE_EQ(vhd.rank_link_bytes(), 2 * kM * (n - 1) / n);  // "at most 2 M"
    EXPECT_LE(vhd.rank_link_bytes(), 2 * kM);
    EXPECT_DOUBLE_EQ(vhd.rank_sum_bytes(), kM * (n - 1) / n);  // "at most M"
    EXPECT_DOUBLE_EQ(vhd.total_sent_bytes, 2 * kM * (n - 1));
    EXPECT_DOUBLE_EQ(vhd.total_sum_bytes, kM * (n - 1));
  }
}

TEST(AllreduceShape, OtherRankCountsFoldOrNeedNoFold) {
  for (int n = 3; n <= 64; ++n) {
    if (is_pow2(n)) continue;
    int k = 0;
    while ((2 << k) <= n) ++k;
    const int p = 1 << k, r = n - p, depth = k + 1;  // ceil(log2 n) for a non-power of two
    const AllreduceShape brd = ShapeAllreduce("brd", n, kM);
    EXPECT_EQ(brd.num_phases(), k + 2) << n;
    EXPECT_DOUBLE_EQ(brd.rank_link_bytes(), kM * k + 2 * kM) << n;
    EXPECT_DOUBLE_EQ(brd.rank_sum_bytes(), kM * k + kM) << n;
    EXPECT_DOUBLE_EQ(brd.total_sent_bytes, kM * p * k + 2 * r * kM) << n;
    EXPECT_DOUBLE_EQ(brd.total_sum_bytes, kM * p * k + r * kM) << n;

    const AllreduceShape vhd = ShapeAllreduce("vhd", n, kM);
    EXPECT_EQ(vhd.num_phases(), 2 * k + 2) << n;
    EXPECT_DOUBLE_EQ(vhd.rank_link_bytes(), 2 * kM * (p - 1) / p + 2 * kM) << n;
    EXPECT_DOUBLE_EQ(vhd.rank_sum_bytes(), kM * (p - 1) / p + kM) << n;
    EXPECT_DOUBLE_EQ(vhd.total_sent_bytes, 2 * kM * (p - 1) + 2 * r * kM) << n;

    const AllreduceShape brb = ShapeAllreduce("brb", n, kM);
    EXPECT_EQ(brb.num_phases(), 2 * depth) << n;
    EXPECT_DOUBLE_EQ(brb.rank_link_bytes(), 2 * kM * depth) << n;
    EXPECT_DOUBLE_EQ(brb.total_sent_bytes, 2 * kM * (n - 1)) << n;

    const AllreduceShape ring = ShapeAllreduce("ring", n, kM);
    EXPECT_EQ(ring.num_phases(), 2 * (n - 1)) << n;
    EXPECT_NEAR(ring.rank_link_bytes(), 2 * kM * (n - 1) / n, 1e-6) << n;
    EXPECT_NEAR(ring.rank_sum_bytes(), kM * (n - 1) / n, 1e-6) << n;
    EXPECT_DOUBLE_EQ(ring.total_sent_bytes, 2 * kM * (n - 1)) << n;
  }
}

// Timed phase by phase, a shape gives the closed forms of strata/comm/cost_model.hpp (which NetworkCostModel now
// computes from the shapes).
TEST(AllreduceShape, TimesAreTheCostModelsClosedForms) {
  const double a = 12e-6, b = 1 / 1.2e9, g = 1 / 5e9;
  for (int n = 2; n <= 64; ++n) {
    int k = 0;
    while ((2 << k) <= n) ++k;
    const int p = 1 << k, depth = p == n ? k : k + 1;
    for (double m : {4.0, 65536.0, 3e7}) {
      const double fold = n > p ? 2 * (a + m * b) + m * g : 0, share = double(p - 1) / p;
      const double brd = fold + k * (a + m * b + m * g);
      const double vhd = fold + 2 * k * a + 2 * share * m * b + share * m * g;
      const double ring = 2 * (n - 1) * a + 2 * double(n - 1) / n * m * b + double(n - 1) / n * m * g;
      const double brb = 2 * depth * (a + m * b) + depth * m * g;
      EXPECT_NEAR(ShapeAllreduce("brd", n, m).seconds(a, b, g), brd, 1e-12 * (1 + brd)) << n << " " << m;
      EXPECT_NEAR(ShapeAllreduce("vhd", n, m).seconds(a, b, g), vhd, 1e-12 * (1 + vhd)) << n << " " << m;
      EXPECT_NEAR(ShapeAllreduce("ring", n, m).seconds(a, b, g), ring, 1e-12 * (1 + ring)) << n << " " << m;
      EXPECT_NEAR(ShapeAllreduce("brb", n, m).seconds(a, b, g), brb, 1e-12 * (1 + brb)) << n << " " << m;
      // The cost model's prediction is the same closed form, written out above, for each algorithm.
      const NetworkCostModel model{a, b, g};
      EXPECT_NEAR(model.predict("brd", n, m), brd, 1e-12 * (1 + brd)) << n << " " << m;
      EXPECT_NEAR(model.predict("vhd", n, m), vhd, 1e-12 * (1 + vhd)) << n << " " << m;
      EXPECT_NEAR(model.predict("ring", n, m), ring, 1e-12 * (1 + ring)) << n << " " << m;
      EXPECT_NEAR(model.predict("brb", n, m), brb, 1e-12 * (1 + brb)) << n << " " << m;
    }
  }
}

TEST(AllreduceShape, FitRecoversTheFiguresBehindMeasuredTimes) {
  const double a = 3e-3, b = 1 / 0.12e9, g = 1 / 20e9;
  for (int n : {2, 3, 8}) {
    std::vector<std::pair<double, double>> samples;
    for (double m : {262144.0, 1048576.0, 4194304.0, 16777216.0})
      samples.emplace_back(m, ShapeAllreduce("vhd", n, m).seconds(a, b, g));
    const NetworkCostModel fitted = NetworkCostModel::fit("vhd", n, samples, g);
    EXPECT_NEAR(fitted.alpha, a, 1e-9 * a) << n;
    EXPECT_NEAR(fitted.beta, b, 1e-9 * b) << n;
  }
  // Times that fall with size would need a negative alpha: it stays 0.
  const NetworkCostModel flat = NetworkCostModel::fit("vhd", 2, {{1e6, 5e-3}, {2e6, 6e-3}, {4e6, 5.5e-3}}, 0);
  EXPECT_GE(flat.alpha, 0);
  EXPECT_GE(flat.beta, 0);
  // A floor under alpha (a ping-pong's latency) holds it there and fits beta alone.
  std::vector<std::pair<double, double>> fast;
  for (double m : {1e6, 4e6}) fast.emplace_back(m, ShapeAllreduce("vhd", 2, m).seconds(0, 1e-9, 0));
  const NetworkCostModel floored = NetworkCostModel::fit("vhd", 2, fast, 0, 5e-6);
  EXPECT_DOUBLE_EQ(floored.alpha, 5e-6);
  EXPECT_LT(floored.beta, 1e-9);
  EXPECT_THROW(NetworkCostModel::fit("vhd", 2, {{1e6, 1e-3}}, 0), Error);
  EXPECT_THROW(NetworkCostModel::fit("vhd", 2, {{1e6, 1e-3}, {1e6, 2e-3}}, 0), Error);
}

TEST(AllreduceShape, UnknownAlgorithmIsAnError) {
  EXPECT_THROW(ShapeAllreduce("mpi", 4, kM), Error);
  EXPECT_THROW(ShapeAllreduce("brd", 0, kM), Error);
  EXPECT_EQ(ShapeAllreduce("vhd", 1, kM).num_phases(), 0);
}

// A chain of layers: layer i has grads[i] bytes of gradient (0: none) in one bucket, its forward reads it.
ScaleNet Chain(const std::vector<double>& fwd_ms, const std::vector<double>& bwd_ms, const std::vector<double>& grads,
               double chunk = 1e12) {
  ScaleNet s;
  const int n = static_cast<int>(fwd_ms.size());
  for (int i = 0; i < n; ++i) {
    s.layers.push_back("l" + std::to_string(i));
    s.forward_s.push_back(fwd_ms[i] / 1000);
    s.backward_s.push_back(bwd_ms[i] / 1000);
  }
  s.reads.resize(n);
  for (int i = n - 1; i >= 0; --i) {
    if (grads[i] <= 0) continue;
    ScaleNet::Bucket b;
    b.name = s.layers[i];
    b.ready_after = i;
    for (double left = grads[i]; left > 0; left -= chunk) b.chunk_bytes.push_back(std::min(chunk, left));
    b.units = {i};
    s.buckets.push_back(b);
    s.reads[i] = {i};
  }
  return s;
}

MachineSpec Free() {
  MachineSpec m;
  m.alpha = m.beta = m.gamma = m.local_alpha = m.local_copy = m.pcie = m.update = 0;
  m.cores = 64;
  return m;
}

TEST(IterationModel, WithoutCommunicationCostTheIterationIsTheComputation) {
  const ScaleNet net = Chain({1, 2, 3, 0.5}, {2, 4, 6, 1}, {1e6, 0, 5e7, 1e3}, 4e6);
  for (const ClusterShape cluster : {ClusterShape{1, 1}, ClusterShape{8, 1}, ClusterShape{3, 4}, ClusterShape{1, 4}}) {
    for (bool overlap : {true, false}) {
      ScaleOptions o;
      o.overlap = overlap;
      o.threads = 3;
      const ScaleResult r = SimulateIteration(net, Free(), cluster, o);
      EXPECT_NEAR(r.iteration_s, 19.5e-3, 1e-12) << cluster.nodes << "x" << cluster.ranks_per_node;
      EXPECT_NEAR(r.compute_s, 19.5e-3, 1e-12);
      EXPECT_NEAR(r.exposed_s, 0, 1e-12);
    }
  }
}

TEST(IterationModel, OneRankUpdatesAfterBackward) {
  MachineSpec m = Free();
  m.update = 1e-9;  // 1 ms for 1e6 bytes
  const ScaleResult r = SimulateIteration(Chain({1, 1}, {1, 1}, {0, 1e6}), m, {1, 1}, ScaleOptions{});
  EXPECT_NEAR(r.iteration_s, 5e-3, 1e-12);
}

// Layer 1's gradient (bytes = comm_ms on a 1 GB/s link, one BRD exchange on 2 ranks) goes out when its backward
// ends; layer 0 has none. With f = b = 1 ms, forward of layer 1 waits for it: the period is max(4, 2 + C) with
// overlap, 4 + C without.
TEST(IterationModel, OverlapHidesWhatBackwardCovers) {
  MachineSpec m = Free();
  m.beta = 1e-9;
  ScaleOptions o;
  o.allreduce = "brd";
  for (double comm_ms : {1.0, 3.0}) {
    const ScaleNet net = Chain({1, 1}, {1, 1}, {0, comm_ms * 1e6});
    const ScaleResult on = SimulateIteration(net, m, {2, 1}, o);
    EXPECT_NEAR(on.iteration_s * 1e3, std::max(4.0, 2 + comm_ms), 1e-9) << comm_ms;
    EXPECT_NEAR(on.exposed_s * 1e3, std::max(0.0, comm_ms - 2), 1e-9) << comm_ms;
    EXPECT_NEAR(on.comm_busy_s * 1e3, comm_ms, 1e-9);
    o.overlap = false;
    const ScaleResult off = SimulateIteration(net, m, {2, 1}, o);
    EXPECT_NEAR(off.iteration_s * 1e3, 4 + comm_ms, 1e-9) << comm_ms;
    EXPECT_NEAR(off.exposed_s * 1e3, comm_ms, 1e-9) << comm_ms;
    o.overlap = true;
  }
}

// Two gradients of one layer on two threads share the link: each takes twice as long, the layer is ready when
// it would be on one thread.
TEST(IterationModel, ConcurrentTransfersShareTheLink) {
  MachineSpec m = Free();
  m.beta = 1e-9;
  ScaleNet net = Chain({1, 1}, {10, 1}, {0, 1e6});
  net.buckets.push_back(net.buckets[0]);  // a second 1 MB gradient of layer 1 (its bias, say)
  ScaleOptions o;
  o.allreduce = "brd";
  const ScaleResult one = SimulateIteration(net, m, {2, 1}, o);
  o.threads = 2;
  const ScaleResult two = SimulateIteration(net, m, {2, 1}, o);
  EXPECT_NEAR(one.comm_busy_s * 1e3, 2, 1e-9);
  EXPECT_NEAR(two.comm_busy_s * 1e3, 4, 1e-9);  // both in hand for 2 ms
  EXPECT_NEAR(one.iteration_s, two.iteration_s, 1e-12);
}

// CPU training on one core: a communication thread's sums take half of it while they overlap backward.
TEST(IterationModel, SumsShareTheCoresWithTheComputation) {
  MachineSpec m = Free();
  m.gamma = 1e-9;  // 1 ms to sum 1e6 bytes
  m.cores = 1;
  ScaleOptions o;
  o.allreduce = "brd";
  const ScaleResult r = SimulateIteration(Chain({1, 1}, {1, 1}, {0, 1e6}), m, {2, 1}, o);
  // Backward of layer 0 and the sum each get half the core from t = 3 ms: both end at 5.
  EXPECT_NEAR(r.iteration_s * 1e3, 5, 1e-9);
  EXPECT_NEAR(r.compute_s * 1e3, 5, 1e-9);
  EXPECT_NEAR(r.exposed_s, 0, 1e-12);
  // The same on a GPU: the cores are free for the sum.
  m.pcie = 1e-12;
  o.gpu = true;
  const ScaleResult gpu = SimulateIteration(Chain({1, 1}, {1, 1}, {0, 1e6}), m, {2, 1}, o);
  EXPECT_NEAR(gpu.iteration_s * 1e3, 4, 1e-6);
}

// GPU training: a chunk is copied to the host, reduced and copied back (the seed's steps 1-3), chunks pipeline
// through the copy streams and the threads.
TEST(IterationModel, GpuCopiesFrameEachChunk) {
  MachineSpec m = Free();
  m.pcie = 1e-9;  // 1 ms per MB each way
  m.beta = 2e-9;  // 2 ms per MB on the link
  ScaleOptions o;
  o.gpu = true;
  o.allreduce = "brd";
  // One 1 MB chunk after layer 1's backward: out 1, reduce 2, back 1: ready 4 ms after submission (t = 3).
  ScaleNet net = Chain({1, 1}, {1, 1}, {0, 1e6});
  Timeline timeline(true);
  ScaleResult r = SimulateIteration(net, m, {2, 1}, o, &timeline);
  // Forward of layer 1 (at 5 without waiting) waits until 3 + 4 = 7: the period is 4 + 2.
  EXPECT_NEAR(r.iteration_s * 1e3, 6, 1e-9);
  // Two 0.5 MB chunks on two threads, in ms after submission: copies out end at 0.5 and 1.0; the transfers
  // (1 ms each alone) start then and share the link from 1.0, ending at 2.0 and 2.5; the copies back take
  // 2.0-2.5 and 2.5-3.0. Forward of layer 1 waits 1 ms: the period is 5.
  net = Chain({1, 1}, {1, 1}, {0, 1e6}, 0.5e6);
  o.threads = 2;
  r = SimulateIteration(net, m, {2, 1}, o);
  EXPECT_NEAR(r.iteration_s * 1e3, 5, 1e-9);
  EXPECT_NEAR(r.comm_busy_s * 1e3, (2.5 - 0.5) + (3.0 - 1.0), 1e-9);
}

// Layer 1's two 1 MB chunks go out at 3 ms, layer 0's at 4 ms, each 1 ms on the link, one thread. Round-robin
// (and a shared oldest-first queue) reduce layer 0's last, at 6 ms: the next forward waits 2 ms and the period
// is 6; taking the lowest layer first reduces it at 5 and the period is 5.
TEST(IterationModel, DispatchDecidesWhatTheNextForwardWaitsFor) {
  MachineSpec m = Free();
  m.beta = 1e-9;
  ScaleOptions o;
  o.allreduce = "brd";
  const ScaleNet net = Chain({1, 1}, {1, 1}, {1e6, 2e6}, 1e6);
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).iteration_s * 1e3, 6, 1e-9);
  o.dispatch = ScaleOptions::Dispatch::kShared;
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).iteration_s * 1e3, 6, 1e-9);
  o.dispatch = ScaleOptions::Dispatch::kLowestLayerFirst;
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).iteration_s * 1e3, 5, 1e-9);
}

// Copies on the computation's stream take the GPU from it: the period is the computation plus both copies.
TEST(IterationModel, CopiesOnTheComputeStreamTakeTheGpu) {
  MachineSpec m = Free();
  m.pcie = 1e-9;
  ScaleOptions o;
  o.gpu = true;
  o.allreduce = "brd";
  const ScaleNet net = Chain({1, 1}, {2, 1}, {0, 1e6});
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).iteration_s * 1e3, 5, 1e-9);
  o.copies_block_compute = true;
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).iteration_s * 1e3, 7, 1e-9);
}

// CPU training with no spare core: each message waits MachineSpec::wakeup for the core while the computation
// runs, and not while it waits (overlap off) or on a GPU.
TEST(IterationModel, MessagesWaitForACoreTheComputationHolds) {
  MachineSpec m = Free();
  m.cores = 1;
  m.wakeup = 1e-3;
  ScaleOptions o;
  o.allreduce = "vhd";  // 2 phases on 2 ranks
  const ScaleNet net = Chain({1, 1}, {10, 1}, {0, 1e6});
  // Submitted at 3 ms while layer 0's 10 ms backward runs: both phases wait 1 ms; hidden by it.
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).comm_busy_s * 1e3, 2, 1e-9);
  o.overlap = false;
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).comm_busy_s * 1e3, 0, 1e-9);
  o.overlap = true;
  o.gpu = true;
  EXPECT_NEAR(SimulateIteration(net, m, {2, 1}, o).comm_busy_s * 1e3, 0, 1e-9);
}

TEST(IterationModel, HierIsSharedMemoryAroundTheNetwork) {
  MachineSpec m = Free();
  m.local_copy = 1e-9;
  m.local_alpha = 1e-6;
  m.gamma = 0.5e-9;
  m.beta = 2e-9;
  m.alpha = 10e-6;
  const double bytes = 4e6;
  ScaleOptions o;
  ASSERT_EQ(ScaleAlgorithmChoice(o, m, {2, 2}, bytes), "hier");
  const ScaleResult r = SimulateIteration(Chain({1, 1}, {100, 1}, {0, bytes}), m, {2, 2}, o);
  // Copy in half, flag, sum half once, VHD of 2 MB across 2 nodes with the link shared by 2 ranks, flag, copy out.
  const double block = bytes / 2;
  const double network = ShapeAllreduce("vhd", 2, block).seconds(m.alpha, 2 * m.beta, m.gamma);
  const double expected = block * m.local_copy + m.local_alpha + block * m.gamma + network + m.local_alpha +
                          block * m.local_copy;
  EXPECT_NEAR(r.comm_busy_s, expected, 1e-12);
}

TEST(IterationModel, PolicyChoices) {
  const MachineSpec m;
  ScaleOptions o;
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {1, 4}, 1e6), "shm");
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {4, 2}, 1e6), "hier");
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {4, 1}, 1e6), "hier");
  o.allreduce = "seed";
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {64, 1}, 64), "brd");
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {64, 1}, 64e6), "vhd");
  o.allreduce = "model";
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {64, 1}, 64e6), "vhd");
  o.allreduce = "ring";
  EXPECT_EQ(ScaleAlgorithmChoice(o, m, {5, 1}, 64e6), "ring");
  o.allreduce = "mpi";
  EXPECT_THROW(SimulateIteration(Chain({1}, {1}, {1e6}), m, {2, 1}, o), Error);
}

TEST(IterationModel, BadOptionsAreErrors) {
  const ScaleNet net = Chain({1}, {1}, {1e6});
  ScaleOptions o;
  EXPECT_THROW(SimulateIteration(net, MachineSpec(), {0, 1}, o), Error);
  o.threads = 0;
  EXPECT_THROW(SimulateIteration(net, MachineSpec(), {2, 1}, o), Error);
  o.threads = 1;
  o.iterations = 2;
  EXPECT_THROW(SimulateIteration(net, MachineSpec(), {2, 1}, o), Error);
}

TEST(IterationModel, TimelineHasEveryRow) {
  MachineSpec m = Free();
  m.pcie = 1e-9;
  m.beta = 1e-9;
  ScaleOptions o;
  o.gpu = true;
  o.threads = 2;
  Timeline timeline(true);
  SimulateIteration(Chain({1, 1}, {1, 1}, {1e6, 1e6}, 0.5e6), m, {4, 1}, o, &timeline);
  const std::string dir = ::testing::TempDir();
  timeline.Write(dir + "/scale_timeline.json");
  std::string text;
  {
    std::ifstream in(dir + "/scale_timeline.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const char* row : {"\"tid\":0", "\"tid\":1", "\"tid\":2", "\"tid\":3", "\"tid\":4", "copy to host", "copy to device",
                          "forward", "backward", "allreduce"})
    EXPECT_NE(text.find(row), std::string::npos) << row;
}

TEST(ScaleNet, FromNetBucketsEveryGradientAsTheEngineDoes) {
  NetParameter p;
  ReadProtoFromTextString(R"(
    layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 4 dim: 10 } shape { dim: 4 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h" inner_product_param { num_output: 300 } }
    layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
    layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "z" inner_product_param { num_output: 5 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" })", &p);
  Net<float> net(p);
  const ScaleNet s = ScaleNet::FromNet(net, 4096, 0);
  EXPECT_EQ(s.batch, 4);
  EXPECT_EQ(s.layers.size(), 5u);
  EXPECT_DOUBLE_EQ(s.gradient_bytes(), 4.0 * (10 * 300 + 300 + 300 * 5 + 5));
  ASSERT_EQ(s.buckets.size(), 4u);
  EXPECT_EQ(s.buckets[0].name, "ip2");  // backward submits the top layer first
  EXPECT_EQ(s.buckets[0].ready_after, 3);
  EXPECT_EQ(s.buckets[3].name, "ip1");
  EXPECT_EQ(s.buckets[3].ready_after, 1);
  int weight_chunks = 0;
  for (const auto& b : s.buckets)
    if (b.name == "ip1" && b.chunk_bytes.size() > 1) weight_chunks = static_cast<int>(b.chunk_bytes.size());
  EXPECT_EQ(weight_chunks, 3);  // 12,000 bytes in chunks of 4,096
  EXPECT_EQ(s.reads[1], std::vector<int>{1});
  EXPECT_EQ(s.reads[3], std::vector<int>{3});
  EXPECT_TRUE(s.reads[2].empty());
  // Fusion packs gradients smaller than its size together: here all four in one bucket.
  EXPECT_EQ(ScaleNet::FromNet(net, 4096, 1 << 20).buckets.size(), 1u);
  const ScaleNet doubled = ScaleNet(s).at_batch(8);
  EXPECT_EQ(doubled.batch, 8);
}

TEST(ScaleInputs, LayerTimes) {
  ScaleNet net = Chain({0, 0}, {0, 0}, {0, 1e6});
  ParseLayerTimes("# times\nbatch 32\nl0 1.5 3\nl1 2 4.5  # the top\n", "t", &net);
  EXPECT_EQ(net.batch, 32);
  EXPECT_DOUBLE_EQ(net.forward_s[0], 1.5e-3);
  EXPECT_DOUBLE_EQ(net.backward_s[1], 4.5e-3);
  ScaleNet again = Chain({0, 0}, {0, 0}, {0, 1e6});
  ParseLayerTimes(LayerTimesText(net), "round trip", &again);
  EXPECT_DOUBLE_EQ(again.backward_s[1], 4.5e-3);
  EXPECT_DOUBLE_EQ(net.at_batch(64).forward_s[0], 3e-3);
  for (const char* bad : {"l0 1 2\nl1 1 2\n", "batch 0\nl0 1 2\nl1 1 2\n", "batch 4\nl0 1 2\n",
                          "batch 4\nl0 1 2\nl1 1 2\nl2 1 1\n", "batch 4\nl0 1 2\nl0 1 2\nl1 1 2\n",
                          "batch 4\nl0 -1 2\nl1 1 2\n", "batch 4\nl0 1\nl1 1 2\n", "batch 4\nl0 1 x\nl1 1 2\n"}) {
    ScaleNet n = Chain({0, 0}, {0, 0}, {0, 1e6});
    EXPECT_THROW(ParseLayerTimes(bad, "bad", &n), Error) << bad;
  }
}

TEST(ScaleInputs, NodeCounts) {
  EXPECT_EQ(ParseNodeCounts("1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ParseNodeCounts("1,2,...,64"), (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(ParseNodeCounts("1,2,...,48"), (std::vector<int>{1, 2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(ParseNodeCounts("3,6,...,12"), (std::vector<int>{3, 6, 12}));
  EXPECT_EQ(ParseNodeCounts("2,5,...,14"), (std::vector<int>{2, 5, 8, 11, 14}));
  for (const char* bad : {"", "0", "2,1", "1,...,8", "1,2,...", "x", "1.5", "1,2,...,..."})
    EXPECT_THROW(ParseNodeCounts(bad), Error) << bad;
  EXPECT_DOUBLE_EQ(SeedSpeedUp(1.0, 256, 1.06, 256, 64), 64 / 1.06);
  EXPECT_NEAR(SeedSpeedUp(1.0, 256, 0.525, 64, 64), 30.476, 1e-3);
}

TEST(MachineSpec, ParsesWritesAndRefuses) {
  const MachineSpec m = MachineSpec::parse(
      "# FDR\nalpha_us 2\nbandwidth_GBps 6.8\nreduce_GBps 5 # one core\npcie_GBps 6\ncores 12\n", "fdr");
  EXPECT_DOUBLE_EQ(m.alpha, 2e-6);
  EXPECT_DOUBLE_EQ(m.beta, 1 / 6.8e9);
  EXPECT_DOUBLE_EQ(m.gamma, 1 / 5e9);
  EXPECT_DOUBLE_EQ(m.pcie, 1 / 6e9);
  EXPECT_EQ(m.cores, 12);
  const MachineSpec again = MachineSpec::parse(m.to_text(), "again");
  EXPECT_NEAR(again.beta, m.beta, 1e-6 * m.beta);
  EXPECT_NEAR(again.alpha, m.alpha, 1e-12);
  EXPECT_EQ(again.cores, 12);
  EXPECT_DOUBLE_EQ(MachineSpec::parse("pcie_GBps 0\n", "cpu").pcie, 0);
  for (const char* bad : {"speed 3\n", "alpha_us\n", "alpha_us x\n", "alpha_us -1\n", "bandwidth_GBps 0\n",
                          "cores 0\n", "cores 2.5\n", "alpha_us 1 2\n", "reduce_GBps inf\n"})
    EXPECT_THROW(MachineSpec::parse(bad, "bad"), Error) << bad;
  EXPECT_THROW(MachineSpec::load("/nonexistent/machine"), Error);
}

}  // namespace
}  // namespace strata
