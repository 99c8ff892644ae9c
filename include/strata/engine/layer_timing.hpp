// Each layer's forward and backward time, measured the one way that `strata time`, `strata scale` and the
// pipeline's planner share: a span per layer between hooks around it (each ending with a device synchronisation in
// GPU mode, so a layer's span holds its own kernels), untimed warm-up passes, then the average over timed passes.
#pragma once

#include <vector>

#include "strata/net.hpp"

namespace strata {

class Timeline;

struct LayerTimingOptions {
  int warmup = 1;       // untimed forward-backward passes first (allocations, caches, algorithm searches)
  int iterations = 1;   // timed passes averaged
  Timeline* timeline = nullptr;     // records each layer's span of the timed passes too
  bool reset_memory_peaks = false;  // MemoryTracker's peaks restart after the warm-up: the timed passes' own
};

struct LayerTimes {
  std::vector<double> fwd_ms, bwd_ms;  // per layer of the net, milliseconds per pass
  double fwd_total_ms = 0, bwd_total_ms = 0;  // the passes' own times, per pass
};

// Runs o.warmup + o.iterations forward-backward passes of `net` and returns its layers' times. The hooks it adds
// are removed before it returns.
template <typename Dtype>
LayerTimes MeasureLayerTimes(Net<Dtype>& net, const LayerTimingOptions& o);

}  // namespace strata
