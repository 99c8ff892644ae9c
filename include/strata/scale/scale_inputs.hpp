// The inputs of `strata scale` that come as text: per-layer times and node counts (docs/scale.md).
//
// A times file gives each layer's forward and backward time at one batch (`strata scale --times_out` writes
// one from a measurement; write your own to model another device):
//
//     # strata scale times
//     batch 256
//     conv1   25.3   50.1     # layer  forward_ms  backward_ms
//     relu1    1.7    2.5
//
// Every layer of the net must appear once, and nothing else.
#pragma once

#include <string>
#include <vector>

#include "strata/scale/iteration_model.hpp"

namespace strata {

// Sets net->forward_s, backward_s and batch from the text; throws strata::Error naming origin and line for a
// malformed line, an unknown or repeated layer, a negative time, or a layer of the net the text leaves out.
void ParseLayerTimes(const std::string& text, const std::string& origin, ScaleNet* net);
void LoadLayerTimes(const std::string& path, ScaleNet* net);
std::string LayerTimesText(const ScaleNet& net);

// "1,2,4" or "1,2,...,4096" (after two counts, "..." continues by the ratio of the last two while it stays at or
// below the count after it): ascending positive counts. Throws strata::Error otherwise.
std::vector<int> ParseNodeCounts(const std::string& spec);

// The seed paper's speed-up s_{N,b} = t(1,b_ref) / t(N,b) x b / b_ref x N, for N ranks of batch b.
double SeedSpeedUp(double t_reference, int reference_batch, double t, int batch, int ranks);

}  // namespace strata
