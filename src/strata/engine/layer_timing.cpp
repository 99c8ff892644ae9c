#include "strata/engine/layer_timing.hpp"

#include <algorithm>
#include <chrono>

#include "strata/common.hpp"
#include "strata/device.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {

template <typename Dtype>
LayerTimes MeasureLayerTimes(Net<Dtype>& net, const LayerTimingOptions& o) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto sync = [] {
    if (Strata::mode() == Strata::GPU) gpu_synchronize();
  };
  const int n = net.num_layers();
  LayerTimes t;
  t.fwd_ms.assign(n, 0);
  t.bwd_ms.assign(n, 0);
  Clock::time_point layer_t0;
  double span_t0 = 0;
  bool timing = false;
  auto begin_layer = [&](int) {
    sync();
    layer_t0 = Clock::now();
    if (o.timeline) span_t0 = o.timeline->now_us();
  };
  auto end_layer = [&](int i, std::vector<double>& ms, const char* what) {
    sync();
    if (!timing) return;
    ms[i] += ms_since(layer_t0);
    if (o.timeline) o.timeline->Record(net.layer_names()[i], what, 0, span_t0);
  };
  const void* owner = &t;
  struct HooksRemoved {  // also when a pass throws: the hooks refer to this frame
    Net<Dtype>& net;
    const void* owner;
    ~HooksRemoved() { net.RemoveHooks(owner); }
  } hooks_removed{net, owner};
  net.add_before_forward_hook(begin_layer, owner);
  net.add_after_forward_hook([&](int i) { end_layer(i, t.fwd_ms, "forward"); }, owner);
  net.add_before_backward_hook(begin_layer, owner);
  net.add_after_backward_hook([&](int i) { end_layer(i, t.bwd_ms, "backward"); }, owner);

  for (int i = 0; i < o.warmup; ++i) {
    net.Forward();
    net.Backward();
  }
  timing = true;
  if (o.reset_memory_peaks) MemoryTracker::reset_all_peaks();
  for (int i = 0; i < o.iterations; ++i) {
    auto t0 = Clock::now();
    net.Forward();
    sync();
    t.fwd_total_ms += ms_since(t0);
    t0 = Clock::now();
    net.Backward();
    sync();
    t.bwd_total_ms += ms_since(t0);
  }
  const double it = std::max(1, o.iterations);
  for (double& v : t.fwd_ms) v /= it;
  for (double& v : t.bwd_ms) v /= it;
  t.fwd_total_ms /= it;
  t.bwd_total_ms /= it;
  return t;
}

template LayerTimes MeasureLayerTimes<float>(Net<float>&, const LayerTimingOptions&);
template LayerTimes MeasureLayerTimes<double>(Net<double>&, const LayerTimingOptions&);

}  // namespace strata
