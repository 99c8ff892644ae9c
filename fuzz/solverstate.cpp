// A solver snapshot (binary solverstate): parsed and restored into an SGD solver (momentum, multistep rate)
// over the small fixed net, then its learning rate read, as `strata train --snapshot` does. The weights file
// it names (learned_net) is not read: that format is fuzz/caffemodel.cpp's.
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace {

// A fresh solver for every input, so that a crash found reproduces from its input alone.
std::unique_ptr<strata::Solver<float>> SgdSolver() {
  strata::SolverParameter param;
  strata::ReadProtoFromTextString("type: 'SGD' base_lr: 0.01 momentum: 0.9 max_iter: 10 "
                                   "lr_policy: 'multistep' stepvalue: 2 stepvalue: 5 gamma: 0.5", &param);
  strata::ReadProtoFromTextString(strata::fuzz::SmallNet(), param.mutable_net_param());
  return strata::SolverRegistry<float>::Create(param);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    strata::SolverState state;
    strata::ReadProtoFromBinaryString(std::string(reinterpret_cast<const char*>(data), size), &state, "fuzz");
    state.clear_learned_net();
    const std::unique_ptr<strata::Solver<float>> solver = SgdSolver();
    solver->Restore(state, "fuzz");
    solver->GetLearningRate();  // reads the restored iteration and step
  } catch (const strata::Error&) {
  }
  return 0;
}
