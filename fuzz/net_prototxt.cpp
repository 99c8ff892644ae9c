// A net definition as text: parsed (nesting limited to kMaxProtoNesting), upgraded from Caffe's V1 layout,
// built into a Net<float>, as `strata train/test/time` do with --model, and run forward and backward once
// (inputs are zeros; the memory cap in fuzz_util.hpp keeps that to milliseconds).
#include <string>

#include "fuzz_util.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (strata::fuzz::NamesDeviceFile(text)) return 0;
  try {
    strata::NetParameter param;
    strata::ReadProtoFromTextString(text, &param, "fuzz");
    strata::UpgradeV1Net(&param);
    strata::Net<float> net(param);
    net.Forward();
    net.Backward();
  } catch (const strata::Error&) {
  }
  return 0;
}
