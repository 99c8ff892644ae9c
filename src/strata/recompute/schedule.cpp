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
  // Net outputs (the loss) are read after Backward by the solver's display: never freed.
  std::vector<bool> output(net.blobs().size(), false);
  for (const Blob<Dtype>* b : net.output_blobs())
    for (size_t i = 0; i < net.blobs().size(); ++i) output[i] = output[i] || net.blobs()[i].get() == b;
  const size_t k = plan.segments.size();
  for (size_t i = 0; i < k; ++i) {
    std::vector<int> layers, fwd_free, bwd_free, re;
    for (int v : plan.segments[i]) {
      const auto& n = g.nodes[v];
      layers.insert(layers.end(), n.layers.begin(), n.layers.end());
      // Forward keeps the last segment whole; once a segment's backward is done nothing reads its values
      // again (the plan's peak counts only earlier segments' boundaries while an earlier segment runs).
      for (int b : n.blobs) {
        if (output[b]) continue;
        if (!kept[v]) fwd_free.push_back(b);
        bwd_free.push_back(b);
      }
    }
    if (i + 1 < k)
      for (int v : plan.recompute[i]) re.insert(re.end(), g.nodes[v].layers.begin(), g.nodes[v].layers.end());
    // Inside a segment the net's own layer order: it is topological, and it keeps the order in which random
    // layers draw (and in which layers sharing memory through Split read and write it) as without a plan.
    std::sort(layers.begin(), layers.end());
    std::sort(re.begin(), re.end());
    s.layers.push_back(layers);
    s.free_after_forward.push_back(fwd_free);
    s.recompute_layers.push_back(re);
    s.free_after_backward.push_back(bwd_free);
  }
  return s;
}

template RecomputeSchedule MakeSchedule<float>(const Net<float>&, const RecomputeGraph&, const RecomputePlan&);
template RecomputeSchedule MakeSchedule<double>(const Net<double>&, const RecomputeGraph&, const RecomputePlan&);

}  // namespace strata
