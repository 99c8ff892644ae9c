#include "strata/layer_modules.hpp"

#include <dlfcn.h>

#include <mutex>

#include "strata/common.hpp"
#include "strata/util/shared_module.hpp"

namespace strata {

namespace {

constexpr const char* kPythonModule = "libstrata_python.so";
// The module's entry point (extern "C"): starts the interpreter if none runs, imports the strata package (which
// registers the "Python" layer type) and returns null, or a message saying why it could not.
constexpr const char* kPythonEntry = "strata_python_start";

std::string StartPython() {
  std::string tried, path;
  // RTLD_GLOBAL: the extension modules the interpreter imports later (NumPy's, strata's own) find the
  // interpreter's symbols in the global namespace, as they do in the python3 program.
  void* module = OpenModuleBesideLibstrata(kPythonModule, RTLD_NOW | RTLD_GLOBAL, &tried, &path);
  if (module == nullptr) {
    return "Strata's Python module cannot be loaded (build Strata with python3-dev and pybind11-dev installed): " +
           tried;
  }
  using Entry = const char* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(module, kPythonEntry));
  if (entry == nullptr) return path + " is not Strata's Python module (rebuild it with libstrata)";
  const char* error = entry();
  return error == nullptr ? "" : error;
}

}  // namespace

void LoadLayerModule(const std::string& type) {
  if (type != "Python") return;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] { error = StartPython(); });
  STRATA_REQUIRE(error.empty()) << "layer type 'Python': " << error;
}

}  // namespace strata
