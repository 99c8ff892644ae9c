// Layer types that live in a module of their own, loaded the first time a net asks for one, so that libstrata
// need not link what they need: "Python" (libstrata_python.so, built from python/, which embeds the interpreter
// and imports the strata package, whose import registers the type).
#pragma once

#include <string>

namespace strata {

// Loads the module that registers `type`, once per process; does nothing when no module provides the type. Throws
// an Error saying why when the module cannot be loaded or started.
void LoadLayerModule(const std::string& type);

}  // namespace strata
