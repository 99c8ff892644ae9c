// The "Python" layer type: a layer whose setup, reshape, forward and backward are methods of a Python class
// (python_param { module layer param_str }), as Caffe's PythonLayer. It lives in the strata extension module,
// which registers it when imported: in a python3 process by `import strata`, in the tools by
// libstrata_python.so (embed.cpp), so libstrata itself never links Python.
#pragma once

#include <pybind11/pybind11.h>

#include "strata/layer.hpp"

namespace strata::python {

namespace py = pybind11;

class PythonLayer : public Layer<float> {
 public:
  explicit PythonLayer(const LayerParameter& param) : Layer<float>(param) {}
  ~PythonLayer() override;

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Python"; }
  // The Python object of the user's class (what net.layers gives for this layer).
  const py::object& self() const { return self_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  // Calls self.<method>(*make_args()) with the GIL held (only here, so the data-parallel engine's threads run
  // meanwhile); a Python exception becomes one Error naming the layer, the method and the exception's last line.
  template <typename MakeArgs>
  void Call(const char* method, MakeArgs make_args);

  py::object self_;
};

// Registers the "Python" type for float nets (the Python API's), once per process.
void RegisterPythonLayer();
// "ValueError: message": the last line of the traceback of the exception being handled.
std::string LastLine(const py::error_already_set& e);

}  // namespace strata::python
