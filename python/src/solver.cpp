// The solvers from Python: only the training loop's stable names (SolverRegistry::Create, Step, Solve, net,
// test_nets, iter, Snapshot, Restore), so that changes inside the solver leave this file alone. Under mpirun the
// solvers train data-parallel (parallel.cpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "parallel.hpp"
#include "strata/solver.hpp"

namespace strata::python {

namespace py = pybind11;

namespace {

// pycaffe's constructors by solver type; get_solver takes the type the file names.
const char* const kSolverClasses[][2] = {
    {"SGDSolver", "SGD"},         {"NesterovSolver", "Nesterov"}, {"AdaGradSolver", "AdaGrad"},
    {"RMSPropSolver", "RMSProp"}, {"AdaDeltaSolver", "AdaDelta"}, {"AdamSolver", "Adam"},
    {"KFACSolver", "KFAC"},
};

SolverPtr MakeSolver(const std::string& file, const std::string& type) {
  SolverParameter param = ReadSolverParam(file);
  if (!type.empty()) {
    param.clear_solver_type();
    param.set_type(type);
  }
  return MakeParallelSolver(param);
}

}  // namespace

void BindSolvers(py::module_& m) {
  py::class_<Solver<float>, SolverPtr>(m, "Solver")
      .def_property_readonly("net", &Solver<float>::net, py::return_value_policy::reference_internal)
      .def_property_readonly("test_nets", &Solver<float>::test_nets)
      .def_property_readonly("iter", &Solver<float>::iter)
      .def_property_readonly("type", [](const Solver<float>& s) { return std::string(s.type()); })
      .def("step", [](Solver<float>& s, int iters) { EndJobOnError([&] {
             s.Step(iters);
             AfterSteps(s);
           }); }, py::arg("iters"),
           py::call_guard<py::gil_scoped_release>())
      .def("solve", [](Solver<float>& s, const std::string& resume) { EndJobOnError([&] { s.Solve(resume); }); },
           py::arg("resume_file") = "", py::call_guard<py::gil_scoped_release>())
      .def("snapshot", [](Solver<float>& s) { EndJobOnError([&] { s.Snapshot(); }); },
           py::call_guard<py::gil_scoped_release>())
      .def("restore", [](Solver<float>& s, const std::string& file) { EndJobOnError([&] { s.Restore(file); }); },
           py::call_guard<py::gil_scoped_release>());
  for (const auto& c : kSolverClasses) {
    const std::string type = c[1];
    m.def(c[0], [type](const std::string& file) { return MakeSolver(file, type); }, py::arg("filename"));
  }
  m.def("get_solver", [](const std::string& file) { return MakeSolver(file, ""); }, py::arg("filename"));
  m.def("rank", &Rank, "this process's rank under mpirun (0 outside it); brings MPI up on first use");
  m.def("size", &Size, "the number of ranks under mpirun (1 outside it)");
}

}  // namespace strata::python
