// How a net is cut into pipeline stages (docs/pipeline.md): which rank runs which stage, which layers each stage
// holds, which blobs cross each cut, and the NetParameter each stage builds. No MPI here: PipelineEngine
// (pipeline_engine.hpp) runs the plan.
//
//   net order:   data layers | conv1 relu1 | b0 b1 b2 | b3 b4 b5 | ip loss
//   stages:      0 ------------------------  1 ------  2 ---------------
//   cross[0] = {x, label}: what stage 0 sends to stage 1 (label passes through stage 1 to the loss in stage 2)
//
// A stage's net is an Input layer with the blobs it receives (stage 0: the outputs of its data layers, which
// run in a separate source net, so that the micro-batches a stage holds in flight share one reader), then its
// layers in net order. A blob a stage sends but also reads itself goes out through a Split at the end of the
// stage, so that its gradient sums what the next stage sends back and what the stage's own readers give.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "strata/proto/strata.pb.h"

namespace strata {

// Which stage and replica a rank runs. Rank r: replica r / stages, stage stages - 1 - r % stages (rank 0 holds
// the last stage, which computes the loss and the test scores that rank 0 logs).
struct PipelineGrid {
  int stages = 1, replicas = 1;
  int stage = 0, replica = 0;
  // Checks stages x replicas against the rank count (one clear error otherwise).
  static PipelineGrid Of(const PipelineParameter& p, int rank, int ranks);
  int RankOf(int stage, int replica) const { return replica * stages + (stages - 1 - stage); }
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
};

// A cut of one net (train or test) into stages.
struct StageCut {
  // The net's layers (after state filtering), each with its stage; non-decreasing.
  std::vector<LayerParameter> layers;
  std::vector<int> stage_of;
  // Whether layer i is a data source (no bottoms, in stage 0: it runs in stage 0's source net).
  std::vector<bool> source;
  // cross[s], s < stages - 1: the blobs stage s sends to stage s + 1, in a fixed order (first use).
  std::vector<std::vector<std::string>> cross;
  int stages() const { return static_cast<int>(cross.size()) + 1; }
  // The blobs stage s receives: cross[s - 1], or for stage 0 the source net's outputs that any stage reads.
  std::vector<std::string> inputs(int s) const;
  // Whether stage s can rebuild its activations from its output: its compute layers are ordinary ones (a stem)
  // followed by at least one Reversible block (which rebuilds its bottom in backward), it is not the last stage,
  // and the only blob of its own making that it sends is the last block's top. Returns the number of ordinary
  // layers before the blocks (0: blocks only; the stage keeps nothing), or -1 if it cannot. With a stem the
  // stage keeps its input of each micro-batch in flight and runs the stem's forward again before backward.
  int reversible_prefix(int s) const;
  bool reversible(int s) const { return reversible_prefix(s) >= 0; }
};

// Cuts `net` (already filtered for its phase): the first layer of stage s + 1 is named cuts[s]. Errors: a name no
// layer of the net has (one inside a Reversible block or another composite layer is named as such), names out
// of net order, a stage with no layer to compute, a blob that no earlier layer produces.
StageCut CutNet(const NetParameter& net, const std::vector<std::string>& cuts);
// The same cut for another net of the same model (a test net): a layer of `net` named in `train` goes to its
// stage there; any other layer to the latest stage among the producers of its bottoms (stage 0 if none), and
// never to an earlier stage than the layer before it.
StageCut CutLike(const NetParameter& net, const StageCut& train);

// The bytes that would cross a cut before layer c of `net`, for c = 0 .. n (0 at both ends): every blob that a
// layer from c on reads as a layer before c wrote it, at `blob_bytes` (its size for one micro-batch; a blob not
// named there counts 0).
std::vector<double> CrossingBytes(const NetParameter& net, const std::map<std::string, double>& blob_bytes);

// What sending costs at the cuts, for PlanCuts: a cut before layer c that is the s-th makes the two stages beside it
// send and receive `bytes[c]` both ways (the blobs forward, their gradients back), at `ms_per_byte[s]`.
struct CutCosts {
  std::vector<double> bytes;        // n + 1 values: CrossingBytes
  std::vector<double> ms_per_byte;  // stages - 1 values: each link between neighbouring stages
};

// Where to cut `net` into `stages` stages so that the most loaded stage is as light as it can be: a stage's load is
// the larger of its share of the time (`time[i]`: layer i's measured forward + backward, with the sends at its cuts
// when `links` are given) and its share of the memory (`memory[i]`: layer i's parameters and outputs, in bytes;
// all 0: time alone). Cuts fall only between layers (never before stage 0's data layers).
std::vector<std::string> PlanCuts(const NetParameter& net, const std::vector<double>& time,
                                  const std::vector<double>& memory, int stages, const CutCosts& links = {});

// Stage s's nets. `shapes`: every blob's shape in the whole net (Net::blob_by_name after construction), for the
// Input layer. `compute` always exists; `source` only for stage 0 (its data layers).
struct StageNets {
  NetParameter source;
  NetParameter compute;
  // The compute net's blob that carries cross-out blob `cross[s][i]` (a Split's top where the stage also reads it).
  std::vector<std::string> send_blobs;
};
StageNets MakeStageNets(const NetParameter& net, const StageCut& cut, int s,
                        const std::map<std::string, std::vector<int>>& shapes);

}  // namespace strata
