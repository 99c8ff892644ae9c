#include "strata/engine/pipeline_stats.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "strata/memory_tracker.hpp"

namespace strata {

std::vector<PipelineStats> GatherPipelineStats(const PipelineStats& mine, const PipelineGrid& grid,
                                               Collectives& world) {
  std::ostringstream s;
  s.precision(17);
  s << mine.iteration_ms << " " << mine.compute_ms << " " << mine.wait_ms << " " << mine.reduce_ms << " "
    << mine.bytes_sent << " "
    << mine.iterations << " " << mine.max_reconstruction_error << " "
    << MemoryTracker::peak(MemoryCategory::kActivation) / 1048576.0 << " " << grid.stage << " " << grid.replica;
  const std::vector<std::string> all = world.GatherToRoot(s.str());
  std::vector<PipelineStats> out;
  if (world.rank() != 0) return out;
  out.resize(static_cast<size_t>(grid.stages));
  for (const std::string& line : all) {
    std::istringstream in(line);
    PipelineStats st;
    int stage = 0, replica = 0;
    in >> st.iteration_ms >> st.compute_ms >> st.wait_ms >> st.reduce_ms >> st.bytes_sent >> st.iterations >>
        st.max_reconstruction_error >> st.peak_activation_mb >> stage >> replica;
    if (replica == 0) {
      out[static_cast<size_t>(stage)] = st;
    }
  }
  return out;
}

std::string PipelineStatsTable(const std::vector<PipelineStats>& stages) {
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof(line), "%5s %10s %14s %11s %8s %13s %11s %15s %11s", "stage", "ms/iter", "compute ms/it",
                "wait ms/it", "bubble", "reduce ms/it", "MB sent/it", "peak activ. MB", "rebuild err");
  s << line;
  for (size_t i = 0; i < stages.size(); ++i) {
    const PipelineStats& st = stages[i];
    const double n = std::max(1, st.iterations);
    const double busy = st.compute_ms + st.wait_ms;
    std::snprintf(line, sizeof(line), "\n%5zu %10.2f %14.2f %11.2f %7.1f%% %13.2f %11.3f %15.2f %11.2e", i,
                  st.iteration_ms / n, st.compute_ms / n, st.wait_ms / n, busy > 0 ? 100 * st.wait_ms / busy : 0.0,
                  st.reduce_ms / n, st.bytes_sent / n / 1e6, st.peak_activation_mb, st.max_reconstruction_error);
    s << line;
  }
  return s.str();
}

}  // namespace strata
