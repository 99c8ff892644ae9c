// A solver definition as text: parsed, the solver it names created over the small fixed net (the file it
// may name instead is not read), and its learning-rate schedule evaluated at a few iterations.
#include <memory>
#include <string>

#include "fuzz_util.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (strata::fuzz::NamesDeviceFile(text)) return 0;
  try {
    strata::SolverParameter param;
    strata::ReadProtoFromTextString(text, &param, "fuzz");
    // Nets come from the input only when given inline; a net named by file is replaced by the fixed one.
    param.clear_net();
    param.clear_train_net();
    param.clear_test_net();
    if (!param.has_net_param() && !param.has_train_net_param()) {
      strata::ReadProtoFromTextString(strata::fuzz::SmallNet(), param.mutable_net_param());
    }
    for (int iter : {0, 1, 1000, param.max_iter()}) {
      int step = 0;
      strata::LearningRateAt(param, iter, &step);
    }
    std::unique_ptr<strata::Solver<float>> solver = strata::SolverRegistry<float>::Create(param);
    solver->GetLearningRate();
  } catch (const strata::Error&) {
  }
  return 0;
}
