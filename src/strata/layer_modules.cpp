#include "strata/layer_modules.hpp"

#include <dlfcn.h>

#include <mutex>

#include "strata/common.hpp"

namespace strata {

namespace {

constexpr const char* kPythonModule = "libstrata_python.so";
// The module's entry point (extern "C"): starts the interpreter if none runs, imports the strata package (which
// registers the "Python" layer type) and returns null, or a message saying why it could not.
constexpr const char* kPythonEntry = "strata_python_start";

// The module is built and installed beside libstrata; the plain name is the fallback (LD_LIBRARY_PATH).
std::string BesideThisLibrary(const char* name) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&LoadLayerModule), &info) == 0 || info.dli_fname == nullptr) return name;
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? name : path.substr(0, slash + 1) + name;
}

std::string StartPython() {
  std::string tried;
  for (const std::string& path : {BesideThisLibrary(kPythonModule), std::string(kPythonModule)}) {
    // RTLD_GLOBAL: the extension modules the interpreter imports later (NumPy's, strata's own) find the
    // interpreter's symbols in the global namespace, as they do in the python3 program.
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (module == nullptr) {
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
      continue;
    }
    using Entry = const char* (*)();
    const auto entry = reinterpret_cast<Entry>(dlsym(module, kPythonEntry));
    if (entry == nullptr) return path + " is not Strata's Python module (rebuild it with libstrata)";
    const char* error = entry();
    return error == nullptr ? "" : error;
  }
  return "Strata's Python module cannot be loaded (build Strata with python3-dev and pybind11-dev installed): " +
         tried;
}

}  // namespace

bool LoadLayerModule(const std::string& type) {
  if (type != "Python") return false;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] { error = StartPython(); });
  STRATA_REQUIRE(error.empty()) << "layer type 'Python': " << error;
  return true;
}

}  // namespace strata
