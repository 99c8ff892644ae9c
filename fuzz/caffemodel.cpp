// Trained weights (a binary caffemodel): read from a file as `strata train --weights` and `strata test --weights`
// read it (ReadCaffemodel: one record at a time, its checksum trailer checked), upgraded from V1, and copied into
// the small fixed net. Inputs with HDF5's signature are left out: libhdf5 1.10 itself crashes on some corrupt
// files (fuzz/README.md).
#include <cstring>
#include <fstream>
#include <string>

#include "fuzz_util.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace {

// Built at the first input (after Init), once: copying weights into it changes only its values.
strata::Net<float>& SmallNet() {
  static strata::Net<float>* net = [] {
    strata::NetParameter param;
    strata::ReadProtoFromTextString(strata::fuzz::SmallNet(), &param);
    return new strata::Net<float>(param);
  }();
  return *net;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    if (size >= 8 && std::memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0) return 0;
    static const std::string file = strata::fuzz::TempDir("caffemodel") + "/input.caffemodel";
    std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
    strata::NetParameter weights;
    strata::ReadNetParamsFromBinaryFile(file, &weights);
    SmallNet().CopyTrainedLayersFrom(weights);
  } catch (const strata::Error&) {
  }
  return 0;
}
