#include "parallel.hpp"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/make_engine.hpp"

namespace strata::python {

namespace py = pybind11;

namespace {

std::unique_ptr<Communicator>& World() {
  static std::unique_ptr<Communicator> world;
  return world;
}

// The solvers that train data-parallel now; stopped before MPI goes down.
std::set<Solver<float>*>& ParallelSolvers() {
  static std::set<Solver<float>*> solvers;
  return solvers;
}

// Whether mpirun (Open MPI's, or a PMI launcher's) started this process.
bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

void Finalize() {
  for (Solver<float>* s : ParallelSolvers()) s->set_engine(nullptr);
  ParallelSolvers().clear();
  World().reset();  // MPI_Finalize: this object initialised MPI
}

// MPI up with `threads` communication threads (each with its own communicator), once per process.
Communicator& BringUp(int threads) {
  if (!World()) {
    Communicator::set_default_mpi_tuning();
    static char program[] = "python3";
    static char* args[] = {program, nullptr};
    static int argc = 1;
    static char** argv = args;
    World() = std::make_unique<Communicator>(&argc, &argv, threads);
    Strata::set_solver_rank(World()->rank());
    Strata::set_solver_count(World()->size());
    if (World()->rank() != 0) FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // rank 0 logs progress
    py::module_::import("atexit").attr("register")(py::cpp_function(&Finalize));
  }
  return *World();
}

// The solver's allreduce: comm_param's tuning table or algorithm, as `strata train` reads them without flags.
AllreducePolicy PolicyOf(const CommParameter& comm) {
  if (comm.has_tuning_table()) return AllreducePolicy::from_table_file(comm.tuning_table());
  std::string name = comm.algorithm();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return AllreducePolicy::from_name(name);
}

}  // namespace

void SolverDeleter::operator()(Solver<float>* solver) const {
  ParallelSolvers().erase(solver);
  solver->set_engine(nullptr);
  delete solver;
}

// Inside `strata train` (a Python layer asking), the tool brought MPI up and set the process's rank and count.
bool MpiUpElsewhere() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return !World() && initialized;
}

int Rank() {
  if (MpiUpElsewhere()) return Strata::solver_rank();
  return LaunchedByMpi() ? BringUp(1).rank() : 0;
}

int Size() {
  if (MpiUpElsewhere()) return Strata::solver_count();
  return LaunchedByMpi() ? BringUp(1).size() : 1;
}

void AfterSteps(Solver<float>& solver) {
  if (ParallelSolvers().count(&solver)) solver.engine()->Drain();
}

void AbortJob(const char* what) {
  std::fprintf(stderr, "error: rank %d of %d: %s\n", Rank(), Size(), what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

SolverPtr MakeParallelSolver(const SolverParameter& param) {
  if (!LaunchedByMpi() || MpiUpElsewhere()) return SolverPtr(SolverRegistry<float>::Create(param).release());
  STRATA_REQUIRE(!param.has_pipeline_param())
      << "pipeline_param: pipeline training runs from `strata train`, not from a Python script";
  const DataParallelOptions options = DataParallelOptions::FromProto(param.comm_param(), Strata::mode() == Strata::GPU);
  Communicator& comm = BringUp(options.threads);
  STRATA_REQUIRE(comm.num_comm_threads() >= options.threads)
      << "the solver's comm_param asks for " << options.threads << " communication threads, but MPI came up with "
      << comm.num_comm_threads() << " (strata.rank() or an earlier solver brought it up): make this solver first";
  SolverPtr solver;
  EndJobOnError([&] {
    // MakeEngine's choice, as in strata train: the data-parallel engine on several ranks.
    EngineSetup setup;
    setup.comm = &comm;
    setup.policy = PolicyOf(param.comm_param());
    setup.options = options;
    solver = SolverPtr(SolverRegistry<float>::Create(param, setup).release());
    if (comm.size() > 1) ParallelSolvers().insert(solver.get());
  });
  return solver;
}

}  // namespace strata::python
