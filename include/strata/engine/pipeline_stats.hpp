// What a pipeline stage measures of itself, gathered to rank 0 and printed one line per stage (docs/pipeline.md,
// "Reports").
#pragma once

#include <string>
#include <vector>

#include "strata/comm/collectives.hpp"
#include "strata/engine/pipeline_plan.hpp"

namespace strata {

// Per-stage figures since training began (or since PipelineEngine::ResetStats).
struct PipelineStats {
  double compute_ms = 0;  // forward and backward (replays included)
  double wait_ms = 0;     // waiting for a neighbour's message or for a send to finish: the bubble
  double reduce_ms = 0;   // summing gradients over the replicas
  double bytes_sent = 0;
  double iteration_ms = 0;  // whole iterations, as the solver sees them
  int iterations = 0;
  double max_reconstruction_error = 0;  // ASYNC, Reversible stages: the largest relative error of a rebuilt input
  double peak_activation_mb = 0;  // filled in by GatherPipelineStats (MemoryTracker's peak of the stage's process)
};

// Every stage's figures on rank 0 of `world` (stage s of replica 0 at index s; empty elsewhere). Collective.
std::vector<PipelineStats> GatherPipelineStats(const PipelineStats& mine, const PipelineGrid& grid,
                                               Collectives& world);
// The per-stage table the engine logs (rank 0).
std::string PipelineStatsTable(const std::vector<PipelineStats>& stages);

}  // namespace strata
