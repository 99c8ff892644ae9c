#include "strata/data/image_codecs.hpp"

#include <dlfcn.h>

#include <mutex>

#include "strata/common.hpp"
#include "strata/util/shared_module.hpp"

namespace strata::image_codecs {

bool Built() {
#ifdef STRATA_USE_OPENCV
  return true;
#else
  return false;
#endif
}

namespace {

const Table* Load(std::string* error) {
  if (!Built()) {
    *error = "Strata was built without OpenCV (install libopencv-imgcodecs-dev and rebuild)";
    return nullptr;
  }
  std::string tried, path;
  // RTLD_LOCAL: OpenCV's many libraries stay out of the global symbol namespace.
  void* module = OpenModuleBesideLibstrata(kModuleName, RTLD_NOW | RTLD_LOCAL, &tried, &path);
  if (module == nullptr) {
    *error = "cannot load Strata's image codec module " + std::string(kModuleName) + ": " + tried;
    return nullptr;
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
