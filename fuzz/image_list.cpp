// An image list file (ImageData's source, convert_imageset's LISTFILE: "path label" lines), written to a
// temporary file and read as both read it: every line parsed, the label checked, each path trimmed.
#include <fstream>
#include <string>

#include "fuzz_util.hpp"
#include "strata/data/converters.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string file = strata::fuzz::TempDir("image_list") + "/list.txt";
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  try {
    size_t chars = 0;
    for (const auto& entry : strata::ReadImageList(file)) chars += entry.path.size() + (entry.label > 0);
    (void)chars;
  } catch (const strata::Error&) {
  }
  return 0;
}
