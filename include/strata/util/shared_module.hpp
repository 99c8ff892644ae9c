// Strata's own modules: shared libraries built and installed beside libstrata (the image codecs on OpenCV, the
// Python interpreter for "Python" layers) that libstrata opens on first use, so that it need not link what they
// link.
#pragma once

#include <string>

namespace strata {

// dlopen(name, flags) beside libstrata first, then by the plain name (the loader's search path: LD_LIBRARY_PATH).
// Returns the handle, or null with every dlopen error appended to *tried ("; "-separated); on success *opened names
// the path that loaded.
void* OpenModuleBesideLibstrata(const std::string& name, int flags, std::string* tried, std::string* opened);

}  // namespace strata
