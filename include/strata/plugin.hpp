// Plugins: a user's shared library of custom layers, loaded at start-up by the tools, so that `strata train`,
// `test`, `time`, `plan` and `draw` run nets with layers that libstrata does not have. The library is built
// against an installed Strata (examples/custom_layer) and registers its layers with REGISTER_LAYER_CLASS as a
// program of one's own would; loading it runs those registrations.
//
//   strata train --plugin=libmylayers.so [--plugin=more.so | --plugin=a.so,b.so] --solver=S
//   STRATA_PLUGINS=libmylayers.so:more.so mpirun -np 2 strata train --solver=S     (every rank loads them)
#pragma once

#include <set>
#include <string>
#include <vector>

namespace strata {

// What one library registered while it loaded.
struct PluginRegistrations {
  std::set<std::string> added;       // layer types new to the registry
  std::set<std::string> duplicates;  // layer types the registry already had (built in, or another plugin's)
};

// Loads the shared library at `path` (dlopen's rules: a name without '/' is searched for as the loader does) and
// returns the layer types it added. A library that cannot be loaded, or that registers a type already known, is
// an Error naming the library; the second leaves the registry as it was.
std::vector<std::string> LoadPlugin(const std::string& path);

// The plugins a tool is asked for: every --plugin=LIST or --plugin LIST in argv (each LIST comma-separated; they are
// taken out of argv, since a command-line parser would keep only the last), then STRATA_PLUGINS (colon-separated).
std::vector<std::string> TakePluginArguments(int* argc, char** argv);

// Loads each of `paths` in order, logging the types each adds.
void LoadPlugins(const std::vector<std::string>& paths);

namespace internal {
// The registrations of the library LoadPlugin is loading now, or null (LayerRegistry::AddCreator reads it).
PluginRegistrations* PluginBeingLoaded();
}  // namespace internal

}  // namespace strata
