#include "strata/plugin.hpp"

#include <dlfcn.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "strata/common.hpp"
#include "strata/layer_factory.hpp"

namespace strata {
namespace {

PluginRegistrations* g_loading = nullptr;
std::mutex g_load_mutex;  // one library at a time: g_loading belongs to it

void SplitInto(const std::string& list, char separator, std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(separator, start), list.size());
    if (end > start) out->push_back(list.substr(start, end - start));
    start = end + 1;
  }
}

template <typename Names>
std::string Joined(const Names& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

namespace internal {
PluginRegistrations* PluginBeingLoaded() { return g_loading; }
}  // namespace internal

std::vector<std::string> LoadPlugin(const std::string& path) {
  STRATA_REQUIRE(!path.empty()) << "--plugin names an empty path";
  std::lock_guard<std::mutex> lock(g_load_mutex);
  PluginRegistrations registrations;
  g_loading = &registrations;
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  g_loading = nullptr;
  if (!handle) {
    const char* why = dlerror();
    STRATA_FAIL() << "plugin " << path << " cannot be loaded: " << (why ? why : "dlopen failed");
  }
  if (!registrations.duplicates.empty()) {
    // Leave the registry as it was, so that nothing of the rejected library is reachable once it is closed.
    for (const std::string& type : registrations.added) {
      LayerRegistry<float>::RemoveCreator(type);
      LayerRegistry<double>::RemoveCreator(type);
    }
    dlclose(handle);
    STRATA_FAIL() << "plugin " << path << " registers layer type(s) " << Joined(registrations.duplicates)
                  << ", which Strata or an earlier plugin already has: rename them";
  }
  if (registrations.added.empty()) {
    LOG(WARNING) << "plugin " << path << " registers no layer type (is it the library you meant?)";
  }
  // The library stays loaded for the life of the process: its layers are in the registry.
  return {registrations.added.begin(), registrations.added.end()};
}

std::vector<std::string> TakePluginArguments(int* argc, char** argv) {
  std::vector<std::string> paths;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const char* arg = argv[i];
    const char* value = nullptr;
    for (const char* prefix : {"--plugin=", "-plugin="}) {
      if (std::strncmp(arg, prefix, std::strlen(prefix)) == 0) value = arg + std::strlen(prefix);
    }
    if (!value && (std::strcmp(arg, "--plugin") == 0 || std::strcmp(arg, "-plugin") == 0)) {
      STRATA_REQUIRE(i + 1 < *argc) << arg << " needs a library path";
      value = argv[++i];
    }
    if (value) {
      SplitInto(value, ',', &paths);
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  argv[kept] = nullptr;
  if (const char* env = std::getenv("STRATA_PLUGINS")) SplitInto(env, ':', &paths);
  return paths;
}

void LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const std::vector<std::string> types = LoadPlugin(path);
    LOG(INFO) << "Loaded plugin " << path << (types.empty() ? "" : ": layer types " + Joined(types));
  }
}

}  // namespace strata
