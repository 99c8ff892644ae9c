#include "strata/recompute/schedule.hpp"

#include <algorithm>

#include "strata/net.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"

namespace strata {

template <typename Dtype>
RecomputeSchedule MakeSchedule(const Net<Dtype>& net, const RecomputeGraph& g, const RecomputePlan& plan) {
  RecomputeSchedule s;
  s.source_layers = g.source_layers;
  std::sort(s.source_layers.begin(), s.source_layers.end());
  std::vector<bool> kept(g.size(), false);
  for (int v : plan.kept) kept[v] = true;
  // Net outputs (the loss) are read after Backward by the solver's display, and a loss's gradient holds its
  // weight: never freed (the graph counts them with the sources).
  const std::vector<bool> pinned = PinnedBlobs(net);
  s.free_after_backward.assign(net.num_layers(), {});
  s.rebuilt_blob.assign(net.blobs().size(), false);
  s.rebuilt_layer.assign(net.num_layers(), false);
  const size_t k = plan.segments.size();
  for (size_t i = 0; i < k; ++i) {
    std::vector<int> layers, fwd_free, fwd_release, re;
    for (int v : plan.segments[i]) {
      const auto& n = g.nodes[v];
      layers.insert(layers.end(), n.layers.begin(), n.layers.end());
      // Forward keeps the boundaries' data and the last segment whole; a recomputation rebuilds the rest, and
      // the state of boundaries whose backward reads it.
      if (!kept[v] || !plan.keeps_state[i]) fwd_release.insert(fwd_release.end(), n.layers.begin(), n.layers.end());
      for (int b : n.blobs) {
        if (pinned[b]) continue;
        if (!kept[v]) fwd_free.push_back(b);
        // Every reader of the node (its own layers and its successors', all later in layer order) has run
        // backward once its first layer has.
        s.free_after_backward[n.layers.front()].push_back(b);
      }
    }
    if (i + 1 < k) {
      for (int v : plan.recompute[i]) {
        re.insert(re.end(), g.nodes[v].layers.begin(), g.nodes[v].layers.end());
        for (int l : g.nodes[v].layers) s.rebuilt_layer[l] = true;
        for (int b : g.nodes[v].blobs) s.rebuilt_blob[b] = !kept[v] && !pinned[b];
      }
    }
    // Inside a segment the net's own layer order: it is topological, and it keeps the order in which random
    // layers draw (and in which layers sharing memory through Split read and write it) as without a plan.
    std::sort(layers.begin(), layers.end());
    std::sort(re.begin(), re.end());
    s.layers.push_back(layers);
    s.free_after_forward.push_back(fwd_free);
    s.release_after_forward.push_back(i + 1 < k ? fwd_release : std::vector<int>{});
    s.recompute_layers.push_back(re);
  }
  // The last segment is kept whole and never recomputed: a value no backward reads goes after its last reader.
  s.free_after_layer_forward.assign(net.num_layers(), {});
  if (k > 0) {
    for (int v : plan.segments.back()) {
      const auto& n = g.nodes[v];
      if (!n.frees_after_last_reader) continue;
      auto& frees = s.free_after_layer_forward[n.last_reader];
      frees.insert(frees.end(), n.blobs.begin(), n.blobs.end());
    }
  }
  return s;
}

template RecomputeSchedule MakeSchedule<float>(const Net<float>&, const RecomputeGraph&, const RecomputePlan&);
template RecomputeSchedule MakeSchedule<double>(const Net<double>&, const RecomputeGraph&, const RecomputePlan&);

}  // namespace strata
