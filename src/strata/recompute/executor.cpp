#include "strata/recompute/executor.hpp"

#include <memory>

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"

namespace strata {

// In the last segment, which nothing re-runs, a reversible block drops the inputs it rebuilds in backward, as the
// plain passes do (Net::ForwardFromTo): an earlier segment's re-run that reads one comes after the block's backward
// has written it back.
template <typename Dtype>
Dtype RecomputeExecutor<Dtype>::RunForward(Net<Dtype>& net, int layer_id, bool last_segment) {
  if (net.layers()[layer_id]->IsStochastic()) replay_rng_[layer_id] = Strata::rng();
  const Dtype loss = last_segment ? net.ForwardFromTo(layer_id, layer_id) : net.RunLayerForward(layer_id);
  for (int b : schedule_.free_after_layer_forward[layer_id]) net.blobs()[b]->data()->release();
  return loss;
}

template <typename Dtype>
void RecomputeExecutor<Dtype>::RunBackward(Net<Dtype>& net, int layer_id, bool keep_values) {
  net.BackwardFromTo(layer_id, layer_id);
  // Nothing reads this layer's state again this iteration, nor, once the node's first layer is done, the
  // node's values and gradients: the next forward allocates them again. A backward that another follows frees
  // what that one rebuilds, and the gradients, which it writes anew.
  if (!keep_values || schedule_.rebuilt_layer[layer_id]) net.layers()[layer_id]->ReleaseActivations();
  for (int b : schedule_.free_after_backward[layer_id]) {
    Blob<Dtype>& blob = *net.blobs()[b];
    if (!keep_values || schedule_.rebuilt_blob[b]) {
      blob.release_memory();
    } else if (blob.diff()) {
      blob.diff()->release();
    }
  }
}

// A re-run fires no hooks: the overlapped allreduce and timing see each layer once. A random or stateful layer
// (Dropout, BatchNorm in training) is replayed: it draws what its forward drew and leaves its statistics as they
// were (ReplayForward).
template <typename Dtype>
void RecomputeExecutor<Dtype>::Recompute(Net<Dtype>& net, int layer_id) {
  const auto& layer = net.layers()[layer_id];
  const auto& bottom = net.bottom_vecs()[layer_id];
  const auto& top = net.top_vecs()[layer_id];
  if (!layer->IsStochastic()) {
    layer->Forward(bottom, top);
    return;
  }
  auto it = replay_rng_.find(layer_id);
  CHECK(it != replay_rng_.end()) << "recompute of " << net.layer_names()[layer_id] << " before its forward";
  ReplayForward<Dtype>({layer}, it->second, [&] { layer->Forward(bottom, top); });
}

template <typename Dtype>
Dtype RecomputeExecutor<Dtype>::Forward(Net<Dtype>& net) {
  Dtype loss = 0;
  for (int i : schedule_.source_layers) loss += RunForward(net, i, false);
  for (size_t s = 0; s < schedule_.layers.size(); ++s) {
    for (int i : schedule_.layers[s]) loss += RunForward(net, i, s + 1 == schedule_.layers.size());
    for (int b : schedule_.free_after_forward[s]) net.blobs()[b]->data()->release();
    for (int i : schedule_.release_after_forward[s]) net.layers()[i]->ReleaseActivations();
  }
  return loss;
}

template <typename Dtype>
void RecomputeExecutor<Dtype>::RunBackwards(Net<Dtype>& net, bool keep_values) {
  for (size_t s = schedule_.layers.size(); s-- > 0;) {
    for (int i : schedule_.recompute_layers[s]) Recompute(net, i);
    const auto& layers = schedule_.layers[s];
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) RunBackward(net, *it, keep_values);
  }
  const auto& sources = schedule_.source_layers;
  for (auto it = sources.rbegin(); it != sources.rend(); ++it) RunBackward(net, *it, keep_values);
}

template <typename Dtype>
void RecomputeExecutor<Dtype>::Backward(Net<Dtype>& net) {
  RunBackwards(net, false);
}

template <typename Dtype>
void RecomputeExecutor<Dtype>::BackwardKeepingValues(Net<Dtype>& net) {
  RunBackwards(net, true);
}

template <typename Dtype>
void InstallRecomputePlan(Net<Dtype>* net, const RecomputePlan& plan) {
  const RecomputeGraph g = ExtractGraph(*net);
  size_t planned = 0;
  for (const auto& segment : plan.segments) planned += segment.size();
  STRATA_REQUIRE(planned == static_cast<size_t>(g.size()))
      << "a recompute plan over " << planned << " nodes does not fit net '" << net->name() << "', whose graph has "
      << g.size();
  net->set_pass_runner(std::make_unique<RecomputeExecutor<Dtype>>(MakeSchedule(*net, g, plan)));
}

STRATA_INSTANTIATE_CLASS(RecomputeExecutor);
template void InstallRecomputePlan<float>(Net<float>*, const RecomputePlan&);
template void InstallRecomputePlan<double>(Net<double>*, const RecomputePlan&);

}  // namespace strata
