// The recompute executor: runs a Net's forward and backward passes by a RecomputeSchedule (docs/recompute.md,
// "The executor"). It is installed on the net as its NetPassRunner, so solvers and the data-parallel engine keep
// calling Net::Forward and Net::Backward. InstallRecomputePlan is the one way to install it, for the solver's
// recompute_param and for the tools alike.
#pragma once

#include <map>
#include <random>
#include <utility>

#include "strata/net_pass_runner.hpp"
#include "strata/recompute/schedule.hpp"

namespace strata {

struct RecomputePlan;

// Forward runs the source layers, then each segment's layers in the net's own order, and after each segment but
// the last frees the data of its values that are not kept and its layers' saved state. Backward goes through the
// segments from the last: it re-runs the segment's recompute set, then runs the segment's layers' backward in
// reverse order, freeing each layer's saved state after its backward and, after a node's first layer, the node's
// data and gradients. The net's outputs and their gradients are never freed.
//
// Hooks fire once per layer, from the real forward and backward only (after a layer's backward hooks its memory
// may be gone): the layers run through Net::RunLayerForward and Net::RunLayerBackward, re-runs call the layer
// directly. A re-run of a random layer (IsStochastic: Dropout) draws what its forward drew, from a copy of the
// engine taken just before that forward (before its hooks, which draw no random numbers), and a layer that
// updates statistics in forward (BatchNorm) gets them back afterwards (ReplayForward).
//
// In the last segment (all of a store-all plan, which is what blob_lifetime FREE_AFTER_USE installs) a value that
// no backward reads goes once its last reader has run forward, and layers that rebuild their bottoms in backward
// (reversible blocks) drop those bottoms as the plain passes do. In earlier segments they do not: the schedule
// alone frees memory there, as the planner counted it, and a re-run may read them again.
template <typename Dtype>
class RecomputeExecutor : public NetPassRunner<Dtype> {
 public:
  // `schedule` must be made for the net the executor is installed on (MakeSchedule).
  explicit RecomputeExecutor(RecomputeSchedule schedule) : schedule_(std::move(schedule)) {}

  Dtype Forward(Net<Dtype>& net) override;
  void Backward(Net<Dtype>& net) override;
  // The same backward, freeing only the gradients and what the next backward's recomputations rebuild: values kept
  // from forward keep their data, layers not re-run their saved state.
  void BackwardKeepingValues(Net<Dtype>& net) override;

  const RecomputeSchedule& schedule() const { return schedule_; }

 private:
  Dtype RunForward(Net<Dtype>& net, int layer_id, bool last_segment);
  void RunBackward(Net<Dtype>& net, int layer_id, bool keep_values);
  void RunBackwards(Net<Dtype>& net, bool keep_values);
  void Recompute(Net<Dtype>& net, int layer_id);

  RecomputeSchedule schedule_;
  std::map<int, std::mt19937> replay_rng_;  // random layer -> the engine as its forward found it
};

// Runs `net`'s Forward and Backward by `plan` from now on: extracts the net's graph, turns the plan into a
// schedule (MakeSchedule) and installs a RecomputeExecutor for it (Net::set_pass_runner). The plan may have
// been made on another net built from the same definition: the graph, and so the node ids, are the same.
template <typename Dtype>
void InstallRecomputePlan(Net<Dtype>* net, const RecomputePlan& plan);

}  // namespace strata
