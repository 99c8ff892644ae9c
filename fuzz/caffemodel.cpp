// Trained weights (a binary caffemodel): parsed, upgraded from V1, and copied into the small fixed net, as
// `strata train --weights` and `strata test --weights` do.
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
    strata::NetParameter weights;
    strata::ReadProtoFromBinaryString(std::string(reinterpret_cast<const char*>(data), size), &weights, "fuzz");
    strata::UpgradeV1Net(&weights);
    SmallNet().CopyTrainedLayersFrom(weights);
  } catch (const strata::Error&) {
  }
  return 0;
}
