// The scaling model: a discrete-event simulation of one rank's data-parallel iteration as Strata runs it
// (strata/engine/data_parallel_engine.hpp), on any number of nodes, for `strata scale` (docs/scale.md).
//
// What it simulates, per rank (every rank does the same, so one rank stands for all):
//   * the computation: each layer's forward, then each layer's backward, in the net's order, with the times
//     measured by `strata time` or read from a file; a layer's next forward first waits for the updates of the
//     parameters it reads (overtaking, seed section 4.3), and with overlap off every update is waited for after
//     backward;
//   * the gradients as the engine's BucketPlan cuts them: a bucket is submitted when the backward that
//     finishes it is done (or, overlap off, all after backward), its chunks dealt round-robin to the
//     communication threads;
//   * on a GPU, each chunk's copy to the host before its allreduce and back after it (the seed's steps 1 and 3:
//     one copy stream each way, at the PCIe rate);
//   * each chunk's allreduce as the allreduce policy would run it (the hybrid's choice by size and cluster, its
//     algorithm's phases: strata/comm/allreduce_shape.hpp), each phase a latency alpha, the bytes on the
//     rank's link and the bytes summed at gamma; `hier` as shared-memory copies inside the node around the
//     network algorithm on 1/L of the chunk;
//   * on the CPU, each chunk's one-pass update after its allreduce (on a GPU the update kernels are not timed).
// Shared resources are fluid: concurrent transfers share the node's link equally (L ranks of a node share it
// too), and on the CPU the computation (compute_threads cores) and the communication threads' copies, sums and
// updates (one core each) share the rank's cores in proportion when they need more than it has. Left out:
// congestion inside the network, stragglers, OS noise, and the GPU's update kernels.
#pragma once

#include <string>
#include <vector>

#include "strata/scale/machine.hpp"

namespace strata {

class CrossoverTable;
class Timeline;
template <typename Dtype>
class Net;

// What the model knows of a net: its layers' times at one batch and its gradients as the engine buckets them.
struct ScaleNet {
  struct Bucket {
    std::string name;                // the first parameter's layer, for reports ("fc6")
    int ready_after = 0;             // the layer whose backward completes it
    std::vector<double> chunk_bytes;
    std::vector<int> units;          // the layers whose updates wait for it
  };
  std::vector<std::string> layers;  // forward order
  std::vector<double> forward_s, backward_s;
  int batch = 1;                     // the batch the times are for
  std::vector<Bucket> buckets;       // in the order backward submits them
  std::vector<std::vector<int>> reads;  // per layer: the layers (units) whose updates its forward waits for

  double gradient_bytes() const;
  // The same net at another batch: every time scaled by batch / this->batch (compute in proportion to the
  // batch, as the seed paper assumes; measure at the batch you mean when small batches matter).
  ScaleNet at_batch(int batch) const;
  // Layers, gradients and buckets from a built net as DataParallelEngine would plan them (chunk and fusion
  // sizes in bytes); times all zero until set.
  static ScaleNet FromNet(const Net<float>& net, size_t chunk_bytes, size_t fusion_bytes);
};

struct ClusterShape {
  int nodes = 1;
  int ranks_per_node = 1;
  int ranks() const { return nodes * ranks_per_node; }
};

struct ScaleOptions {
  bool gpu = false;         // the computation runs on a GPU (copies over PCIe; the CPU is free for communication)
  bool overlap = true;      // false: reduce everything after backward
  int threads = 1;          // communication threads per rank
  int compute_threads = 1;  // CPU training: the cores the computation keeps busy
  // "hybrid": as Strata's hybrid would run it (`table`, or the built-in one: shm on one node, hier across
  // nodes with its built-in network table); "seed": the seed paper's hybrid (BRD or VHD, whichever the machine's
  // figures predict faster), "model": the fastest of brd, vhd, ring and brb by those figures (what tuning on
  // that network would choose); or one algorithm by name (brb, brd, vhd, ring, linear, shm, hier).
  std::string allreduce = "hybrid";
  const CrossoverTable* table = nullptr;
  // How chunks reach the communication threads. kRoundRobin is Strata's engine: chunk k goes to thread k mod T,
  // so every rank's threads meet in the same collectives. kShared (one queue, a free thread takes the oldest
  // chunk) and kLowestLayerFirst (a free thread takes the chunk the next forward needs first) are what-ifs.
  enum class Dispatch { kRoundRobin, kShared, kLowestLayerFirst };
  Dispatch dispatch = Dispatch::kRoundRobin;
  // GPU: the copies run on the computation's stream (as a cudaMemcpy on the legacy default stream does) and take
  // the GPU from it while they run, instead of on copy streams beside it (Strata's staging).
  bool copies_block_compute = false;
  int iterations = 6;  // simulated; the first and the last are not measured
};

struct ScaleResult {
  double iteration_s = 0;  // steady state: from one forward's start to the next
  double compute_s = 0;    // the computation's busy time per iteration (longer than its times when it shares cores)
  double exposed_s = 0;    // per iteration, the time the computation waited for communication
  double comm_busy_s = 0;  // per iteration, the summed time communication threads had a chunk in hand
  // By bucket: the algorithm its first chunk used ("hier+vhd": shared memory in each node around VHD across
  // nodes; hier with one rank per node is named by its network algorithm alone).
  std::vector<std::string> bucket_algorithm;
};

// Throws strata::Error for a cluster or options it cannot simulate (no ranks, threads < 1, an algorithm it has
// no model for). With a timeline, records every simulated span (rows: 0 computation, 1..T communication
// threads, T+1 and T+2 the GPU copies out and back).
ScaleResult SimulateIteration(const ScaleNet& net, const MachineSpec& machine, const ClusterShape& cluster,
                              const ScaleOptions& options, Timeline* timeline = nullptr);

// The algorithm the policy of `options` gives a message of `bytes` on `cluster` (as ScaleOptions::allreduce
// says); "shm" on one node, "hier" across nodes where the hybrid would run those.
std::string ScaleAlgorithmChoice(const ScaleOptions& options, const MachineSpec& machine, const ClusterShape& cluster,
                                 double bytes);

}  // namespace strata
