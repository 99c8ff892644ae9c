// The solvers from Python: only the training loop's stable names (SolverRegistry::Create, Step, Solve, net,
// test_nets, iter, Snapshot, Restore), so that changes inside the solver leave this file alone.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

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

std::unique_ptr<Solver<float>> MakeSolver(const std::string& file, const std::string& type) {
  SolverParameter param = ReadSolverParam(file);
  if (!type.empty()) {
    param.clear_solver_type();
    param.set_type(type);
  }
  return SolverRegistry<float>::Create(param);
}

}  // namespace

void BindSolvers(py::module_& m) {
  py::class_<Solver<float>>(m, "Solver")
      .def_property_readonly("net", &Solver<float>::net, py::return_value_policy::reference_internal)
      .def_property_readonly("test_nets", &Solver<float>::test_nets)
      .def_property_readonly("iter", &Solver<float>::iter)
      .def_property_readonly("type", [](const Solver<float>& s) { return std::string(s.type()); })
      .def("step", &Solver<float>::Step, py::arg("iters"), py::call_guard<py::gil_scoped_release>())
      .def("solve", [](Solver<float>& s, const std::string& resume) { s.Solve(resume); },
           py::arg("resume_file") = "", py::call_guard<py::gil_scoped_release>())
      .def("snapshot", &Solver<float>::Snapshot, py::call_guard<py::gil_scoped_release>())
      .def("restore", [](Solver<float>& s, const std::string& file) { s.Restore(file); },
           py::call_guard<py::gil_scoped_release>());
  for (const auto& c : kSolverClasses) {
    const std::string type = c[1];
    m.def(c[0], [type](const std::string& file) { return MakeSolver(file, type); }, py::arg("filename"));
  }
  m.def("get_solver", [](const std::string& file) { return MakeSolver(file, ""); }, py::arg("filename"));
}

}  // namespace strata::python
