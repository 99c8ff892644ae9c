// Fault injection for the fault tests (tests/fault_matrix.sh): with STRATA_FAULT="POINT:RANK:ITERATION" in the
// environment, the process of solver rank RANK kills itself with SIGKILL the first time it reaches POINT at or
// after training iteration ITERATION, exactly as `kill -9` from outside would, but at a known place:
//   forward    in the forward pass, before the middle layer
//   allreduce  on a communication thread, before a chunk's allreduce (the other ranks are in it or will be)
//   snapshot   between the snapshot's .caffemodel and its .solverstate (an incomplete pair on disk)
// Unset (always, outside those tests), a check costs one load of a flag.
#pragma once

namespace strata {

enum class FaultPoint { kForward, kAllreduce, kSnapshot };

// Kills this process if STRATA_FAULT names `point`, this rank and an iteration <= `iter`.
void MaybeInjectFault(FaultPoint point, int iter);

}  // namespace strata
