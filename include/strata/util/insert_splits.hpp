#pragma once

#include "strata/proto/strata.pb.h"

namespace strata {

// Returns a copy of `param` where every blob consumed by more than one layer (or consumed and also used as a
// loss) is fed through a Split layer, so each consumer gets its own gradient buffer and the Split sums them.
void InsertSplits(const NetParameter& param, NetParameter* param_split);

}  // namespace strata
