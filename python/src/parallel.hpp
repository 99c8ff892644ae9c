// Data-parallel training from a Python script run under mpirun (`mpirun -np N python3 script.py`), with the engine
// `strata train` uses: MPI comes up in the process when the script first asks (strata.rank(), or a solver made
// under mpirun), every solver made then gets a DataParallelEngine, and MPI goes down at interpreter exit.
#pragma once

#include <memory>

#include "strata/solver.hpp"

namespace strata::python {

// Deletes a solver the way one with engine threads must go: the engine is stopped first (Solver::set_engine).
struct SolverDeleter {
  void operator()(Solver<float>* solver) const;
};
using SolverPtr = std::unique_ptr<Solver<float>, SolverDeleter>;

// Makes the solver of `param`: under mpirun, MPI is brought up first (the data layers read this rank's share of
// each batch as they are built) and the solver trains data-parallel across the ranks.
SolverPtr MakeParallelSolver(const SolverParameter& param);
// After Solver::Step: a data-parallel engine may still be reducing and applying the last iteration's gradients
// (the next forward would wait for them); Python reads the weights next, so they are waited for here.
void AfterSteps(Solver<float>& solver);
// This process's rank and the job's size: 0 and 1 outside mpirun.
int Rank();
int Size();
// Runs `f`; under mpirun with several ranks an error ends the whole job (the others would wait in a collective
// forever), after printing it with the rank, as `strata train` does.
template <typename F>
void EndJobOnError(F f);
void AbortJob(const char* what);

template <typename F>
void EndJobOnError(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    if (Size() > 1) AbortJob(e.what());
    throw;
  }
}

}  // namespace strata::python
