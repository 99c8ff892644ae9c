// The solver prototxt's own reading: what the loop (strata/solver.hpp), the engines (a pipeline cuts the nets
// before the loop builds them) and the tools need of a SolverParameter, without the loop.
#pragma once

#include <string>
#include <vector>

#include "strata/proto/strata.pb.h"

namespace strata {

// Reads a solver prototxt and checks it (a net is given, numbers in range), resolving nothing else; without a
// snapshot_prefix, the prefix is the file's name without its extension (Caffe's default).
SolverParameter ReadSolverParam(const std::string& filename);
// The learning rate policy on its own, for tests and tools: rate at `iter` (multistep uses `current_step`,
// which it advances).
float LearningRateAt(const SolverParameter& param, int iter, int* current_step);
// The solver's train net (net, net_param, train_net or train_net_param) with its state: TRAIN plus train_state.
NetParameter TrainNetParam(const SolverParameter& param);
// The solver's test nets, one per test_iter entry, each with its state: TEST plus its test_state. Checks the
// counts and that every test_iter is positive.
std::vector<NetParameter> TestNetParams(const SolverParameter& param);

}  // namespace strata
