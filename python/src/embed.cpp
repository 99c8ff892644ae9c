// libstrata_python.so: the interpreter inside the tools. libstrata opens this module the first time a net has a
// layer of type "Python" (LoadLayerModule), so the tools and libstrata never link Python themselves. It starts
// the interpreter, puts this build's (or installation's) strata package first on sys.path and imports it, which
// registers the "Python" layer type; then it lets go of the GIL, which the layers take around each call.
#include <pybind11/embed.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <string>

namespace py = pybind11;

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Where the strata package sits relative to this module: build/python in the build tree, and
// PREFIX/lib/python3/dist-packages when installed (the module in PREFIX/LIBDIR, LIBDIR being lib or a
// multiarch lib/x86_64-linux-gnu).
std::string PackageDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PackageDirectory), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& candidate : {dir + "/python", dir + "/python3/dist-packages",
                                       dir + "/../python3/dist-packages"}) {
    if (IsDirectory(candidate + "/strata")) return candidate;
  }
  return "";
}

std::string Start() {
  try {
    const std::string dir = PackageDirectory();
    if (!dir.empty()) py::module_::import("sys").attr("path").attr("insert")(0, dir);
    py::module_::import("strata");
  } catch (py::error_already_set& e) {
    std::string what = e.type() ? std::string(py::str(e.type().attr("__name__"))) : "Exception";
    return "cannot import the strata Python package: " + what + ": " + std::string(py::str(e.value()));
  }
  return "";
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* strata_python_start() {
  static std::string error;
  if (Py_IsInitialized()) {  // a Python program that loaded libstrata: its interpreter, its GIL
    py::gil_scoped_acquire gil;
    error = Start();
  } else {
    // No signal handlers of Python's: the tool's SIGINT/SIGTERM handling (snapshot and stop) stays in force.
    py::initialize_interpreter(false);
    error = Start();
    PyEval_SaveThread();  // the layers take the GIL around each call; the interpreter lives until exit
  }
  return error.empty() ? nullptr : error.c_str();
}
