// The loops by solver type, as Caffe (and pycaffe: caffe.SGDSolver(file), ...) names them: each is a Solver whose
// optimizer is that type's, whatever type the parameter names. The rules themselves are in
// strata/solvers/sgd_optimizers.hpp; SolverRegistry<Dtype>::Create(param) gives the loop of the type `param` names.
#pragma once

#include "strata/solver.hpp"

namespace strata {

// `param` with its solver type set to `type`.
inline SolverParameter WithSolverType(SolverParameter param, const char* type) {
  param.clear_solver_type();
  param.set_type(type);
  return param;
}

#define STRATA_TYPED_SOLVER(Name, type_name)                                                   \
  template <typename Dtype>                                                                   \
  class Name : public Solver<Dtype> {                                                         \
   public:                                                                                    \
    explicit Name(const SolverParameter& param, const EngineSetup& setup = EngineSetup())     \
        : Solver<Dtype>(WithSolverType(param, type_name), setup) {}                           \
  }

STRATA_TYPED_SOLVER(SGDSolver, "SGD");
STRATA_TYPED_SOLVER(NesterovSolver, "Nesterov");
STRATA_TYPED_SOLVER(AdaGradSolver, "AdaGrad");
STRATA_TYPED_SOLVER(RMSPropSolver, "RMSProp");
STRATA_TYPED_SOLVER(AdaDeltaSolver, "AdaDelta");
STRATA_TYPED_SOLVER(AdamSolver, "Adam");
STRATA_TYPED_SOLVER(KfacSolver, "KFAC");

#undef STRATA_TYPED_SOLVER

}  // namespace strata
