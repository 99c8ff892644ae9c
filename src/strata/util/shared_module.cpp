#include "strata/util/shared_module.hpp"

#include <dlfcn.h>

namespace strata {

void* OpenModuleBesideLibstrata(const std::string& name, int flags, std::string* tried, std::string* opened) {
  std::string beside = name;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OpenModuleBesideLibstrata), &info) != 0 && info.dli_fname != nullptr) {
    const std::string library = info.dli_fname;
    const size_t slash = library.rfind('/');
    if (slash != std::string::npos) beside = library.substr(0, slash + 1) + name;
  }
  for (const std::string& path : {beside, name}) {
    if (void* module = dlopen(path.c_str(), flags)) {
      *opened = path;
      return module;
    }
    const char* why = dlerror();
    *tried += std::string(tried->empty() ? "" : "; ") + (why ? why : path + ": dlopen failed");
  }
  return nullptr;
}

}  // namespace strata
