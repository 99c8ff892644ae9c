// The message for a label that is no class, shared by the layers that index by label (SoftmaxWithLoss on the CPU
// and the GPU, Accuracy), so that each names the layer and the batch item the same way.
#pragma once

#include <sstream>
#include <string>

namespace strata {

// Label `v` at flat position k of a labels blob with `inner` labels per batch item; `layer` is the layer's
// describe(). Names the batch item and, with several labels per item, the position within it.
inline std::string BadLabelMessage(const std::string& layer, double v, long long k, int inner, int classes,
                                   bool has_ignore, int ignore) {
  std::ostringstream s;
  s << layer << ": batch item " << k / inner;
  if (inner > 1) s << " (label " << k % inner << " of its " << inner << ")";
  s << " has label " << v << ", not a class index in [0, " << classes << ")";
  if (has_ignore) s << " nor the ignore_label " << ignore;
  return s.str();
}

}  // namespace strata
