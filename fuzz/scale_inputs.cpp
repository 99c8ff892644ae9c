// The text inputs of `strata scale` (docs/scale.md): a machine file, a per-layer times file, a --nodes list.
// The first byte picks which; whatever parses is simulated on a small net, which must end with finite times.
#include <cmath>
#include <cstdlib>
#include <string>

#include "fuzz_util.hpp"
#include "strata/common.hpp"
#include "strata/scale/iteration_model.hpp"
#include "strata/scale/machine.hpp"
#include "strata/scale/scale_inputs.hpp"

namespace {

// Three layers, the top two with gradients (one cut in chunks), forwards reading their own.
strata::ScaleNet SmallNet() {
  strata::ScaleNet n;
  n.layers = {"data", "conv", "fc"};
  n.forward_s = {1e-4, 2e-3, 1e-3};
  n.backward_s = {0, 4e-3, 2e-3};
  n.batch = 8;
  n.reads = {{}, {1}, {2}};
  n.buckets = {{"fc", 2, {4e6, 4e6, 1e3}, {2}}, {"conv", 1, {3e5}, {1}}};
  return n;
}

void Simulate(const strata::ScaleNet& net, const strata::MachineSpec& machine) {
  for (const strata::ClusterShape cluster : {strata::ClusterShape{1, 1}, strata::ClusterShape{3, 2}}) {
    strata::ScaleOptions options;
    options.gpu = machine.pcie > 0;
    options.threads = 2;
    const strata::ScaleResult r = strata::SimulateIteration(net, machine, cluster, options);
    if (!std::isfinite(r.iteration_s) || r.iteration_s < 0 || r.exposed_s < -1e-9) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const strata::MachineSpec m = strata::MachineSpec::parse(text, "fuzz");
        // Printing keeps every figure to 6 digits: a second round trip must change nothing.
        const std::string once = strata::MachineSpec::parse(m.to_text(), "round trip").to_text();
        if (strata::MachineSpec::parse(once, "again").to_text() != once) std::abort();
        Simulate(SmallNet(), m);
        break;
      }
      case 1: {
        strata::ScaleNet net = SmallNet();
        strata::ParseLayerTimes(text, "fuzz", &net);
        Simulate(net.at_batch(16), strata::MachineSpec());
        break;
      }
      default: {
        const std::vector<int> nodes = strata::ParseNodeCounts(text);
        for (size_t i = 1; i < nodes.size(); ++i)
          if (nodes[i] <= nodes[i - 1]) std::abort();
        break;
      }
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
