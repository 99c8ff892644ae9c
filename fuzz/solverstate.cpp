// A solver snapshot (binary solverstate): read from a file as `strata train --snapshot` reads it (ReadSolverState:
// one record at a time, its checksum trailer checked) and restored into an SGD solver (momentum, multistep rate)
// over the small fixed net, then its learning rate read. The weights file it names (learned_net, learned_net_name)
// is not read: that format is fuzz/caffemodel.cpp's. Inputs with HDF5's signature are left out (fuzz/caffemodel.cpp).
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"
#include "strata/util/snapshot_files.hpp"

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
    if (size >= 8 && std::memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0) return 0;
    static const std::string file = strata::fuzz::TempDir("solverstate") + "/input.solverstate";
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
    strata::SolverState state;
    strata::ReadSolverState(file, &state);
    state.clear_learned_net();
    state.clear_learned_net_name();
    const std::unique_ptr<strata::Solver<float>> solver = SgdSolver();
    solver->Restore(state, "fuzz");
    solver->GetLearningRate();  // reads the restored iteration and step
  } catch (const strata::Error&) {
  }
  return 0;
}
