// A recomputation plan in the Net's own terms (layer and blob ids), what the recompute executor runs
// (RecomputeExecutor, executor.hpp; docs/recompute.md). Built from a RecomputePlan by MakeSchedule.
#pragma once

#include <vector>

namespace strata {

struct RecomputeGraph;
struct RecomputePlan;
template <typename Dtype>
class Net;

struct RecomputeSchedule {
  std::vector<int> source_layers;                  // run first, never freed or recomputed
  std::vector<std::vector<int>> layers;            // per segment, in forward order
  std::vector<std::vector<int>> free_after_forward;     // per segment: blobs whose data forward frees
  std::vector<std::vector<int>> release_after_forward;  // per segment: layers whose saved state forward frees
  std::vector<std::vector<int>> recompute_layers;       // per segment: re-run just before its backward
  // Per net layer: blobs of the last segment whose data no backward reads, freed once that layer, their last
  // reader, has run forward (all of a test net's, which runs no backward).
  std::vector<std::vector<int>> free_after_layer_forward;
  // Per net layer: blobs whose data and gradient no backward reads once that layer's backward is done (the
  // blobs of the nodes whose first layer it is). Every layer's saved state is freed after its own backward.
  std::vector<std::vector<int>> free_after_backward;
  // For a backward that another follows (Net::BackwardKeepingValues): per blob, whether a recomputation rebuilds
  // its data before each backward that reads it (it is freed whole then; the others only their gradients), and
  // per layer, whether a recomputation re-runs it (its saved state is freed then; the others keep theirs).
  std::vector<bool> rebuilt_blob, rebuilt_layer;
};

template <typename Dtype>
RecomputeSchedule MakeSchedule(const Net<Dtype>& net, const RecomputeGraph& g, const RecomputePlan& plan);

}  // namespace strata
