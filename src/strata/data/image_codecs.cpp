#include "strata/data/image_codecs.hpp"

#include <dlfcn.h>

#include <mutex>

#include "strata/common.hpp"

namespace strata::image_codecs {

bool Built() {
#ifdef STRATA_USE_OPENCV
  return true;
#else
  return false;
#endif
}

namespace {

// The module is installed (and built) beside libstrata; the plain name is the fallback (LD_LIBRARY_PATH).
std::string BesideThisLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Built), &info) == 0 || info.dli_fname == nullptr) return kModuleName;
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? kModuleName : path.substr(0, slash + 1) + kModuleName;
}

const Table* Load(std::string* error) {
  if (!Built()) {
    *error = "Strata was built without OpenCV (install libopencv-imgcodecs-dev and rebuild)";
    return nullptr;
  }
  std::string tried;
  for (const std::string& path : {BesideThisLibrary(), std::string(kModuleName)}) {
    // RTLD_LOCAL: OpenCV's many libraries stay out of the global symbol namespace.
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
      continue;
    }
    using Entry = const Table* (*)();
    const auto entry = reinterpret_cast<Entry>(dlsym(module, kEntryPoint));
    const Table* table = entry == nullptr ? nullptr : entry();
    if (table == nullptr || table->abi != kAbi) {
      *error = path + " is not this Strata's image codec module (rebuild it with libstrata)";
      return nullptr;
    }
    return table;
  }
  *error = "cannot load Strata's image codec module " + std::string(kModuleName) + ": " + tried;
  return nullptr;
}

}  // namespace

const Table& Get() {
  static std::once_flag once;
  static const Table* table = nullptr;
  static std::string error;
  std::call_once(once, [] { table = Load(&error); });
  STRATA_REQUIRE(table != nullptr) << error;
  return *table;
}

}  // namespace strata::image_codecs
