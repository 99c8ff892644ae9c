#include "python_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata::python {

std::string LastLine(const py::error_already_set& e) {
  py::gil_scoped_acquire gil;
  std::string type = "Exception";
  if (e.type()) type = py::str(e.type().attr("__name__"));
  const std::string value = e.value() ? std::string(py::str(e.value())) : std::string();
  return value.empty() ? type : type + ": " + value;
}

namespace {

py::list ToList(const std::vector<Blob<float>*>& blobs) {
  py::list list;
  for (Blob<float>* b : blobs) list.append(py::cast(b, py::return_value_policy::reference));
  return list;
}

}  // namespace

PythonLayer::~PythonLayer() {
  if (!self_) return;
  // At interpreter shutdown the object goes with the interpreter; taking the GIL then would hang.
  if (!Py_IsInitialized() || _Py_IsFinalizing()) {
    self_.release();
    return;
  }
  py::gil_scoped_acquire gil;
  self_ = py::object();
}

template <typename MakeArgs>
void PythonLayer::Call(const char* method, MakeArgs make_args) {
  py::gil_scoped_acquire gil;
  std::string error;
  try {
    self_.attr(method)(*make_args());
  } catch (py::error_already_set& e) {
    error = LastLine(e);
  }
  STRATA_REQUIRE(error.empty()) << describe() << ": " << layer_param_.python_param().module() << "."
                                << layer_param_.python_param().layer() << "." << method << " raised " << error;
}

void PythonLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PythonParameter& p = layer_param_.python_param();
  STRATA_REQUIRE(!p.module().empty() && !p.layer().empty())
      << describe() << ": python_param needs both module and layer (the Python module and its class)";
  {
    py::gil_scoped_acquire gil;
    std::string error;
    try {
      py::module_ module = py::module_::import(p.module().c_str());
      STRATA_REQUIRE(py::hasattr(module, p.layer().c_str()))
          << describe() << ": Python module '" << p.module() << "' has no class '" << p.layer() << "'";
      self_ = module.attr(p.layer().c_str())();
      self_.attr("param_str") = p.param_str();
      self_.attr("phase") = static_cast<int>(phase_);
      self_.attr("data_shard") = py::make_tuple(data_shard().index, data_shard().count);
      self_.attr("_cpp_layer") = py::cast(static_cast<Layer<float>*>(this), py::return_value_policy::reference);
    } catch (py::error_already_set& e) {
      error = LastLine(e);
    }
    STRATA_REQUIRE(error.empty()) << describe() << ": cannot create " << p.module() << "." << p.layer() << ": "
                                  << error;
  }
  Call("setup", [&] { return py::make_tuple(ToList(bottom), ToList(top)); });
}

void PythonLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  Call("reshape", [&] { return py::make_tuple(ToList(bottom), ToList(top)); });
}

void PythonLayer::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  Call("forward", [&] { return py::make_tuple(ToList(bottom), ToList(top)); });
}

void PythonLayer::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  Call("backward", [&] {
    py::list down;
    for (bool d : propagate_down) down.append(py::bool_(d));
    return py::make_tuple(ToList(top), down, ToList(bottom));
  });
}

void RegisterPythonLayer() {
  if (LayerRegistry<float>::Has("Python")) return;
  LayerRegistry<float>::AddCreator(
      "Python", [](const LayerParameter& p) -> std::shared_ptr<Layer<float>> { return std::make_shared<PythonLayer>(p); });
}

}  // namespace strata::python
