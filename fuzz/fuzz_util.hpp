// What every fuzz target shares: quiet logging, the memory cap inputs run under, the small fixed net the
// binary formats are loaded into, and the rule for what counts as a finding.
//
// The rule: an input may be rejected only with a strata::Error. Any other outcome is a bug to fix in the
// library: another exception (it reaches std::terminate and libFuzzer reports the abort), a glog CHECK, an
// AddressSanitizer or UndefinedBehaviorSanitizer report, a timeout or running out of memory.
#pragma once

#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdlib.h>  // mkdtemp
#include <string>

#include "strata/common.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {
namespace fuzz {

// Host memory any one input may make the library allocate through Blobs. A net whose blobs and weights need
// more is refused with an Error by SyncedMemory (MemoryTracker::set_host_limit), so each input runs in
// milliseconds and a prototxt asking for gigabytes is a clean refusal, not an out-of-memory report.
constexpr size_t kHostBytesPerInput = 16 << 20;

// Before the first input: logs only errors (a CHECK's message still prints), the memory cap, and OpenCV's own
// cap on decoded image size (the default, 2^30 pixels, would pass libFuzzer's memory limit).
inline void Init() {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 2;
  google::InitGoogleLogging("strata-fuzz");
  MemoryTracker::set_host_limit(kHostBytesPerInput);
  setenv("OPENCV_IO_MAX_IMAGE_PIXELS", "4194304", 1);
}

// Inputs that name a device file could make a reader block or read forever (a mean_file of /dev/zero);
// they are skipped rather than run. Paths elsewhere simply fail to open.
inline bool NamesDeviceFile(const std::string& text) { return text.find("/dev/") != std::string::npos; }

// The net the binary formats (caffemodel, solverstate) are loaded into: a convolution, batch norm with its
// statistics, an inner product and a loss, so that weights of several shapes and counts are checked.
inline const char* SmallNet() {
  return R"(
name: "fuzz"
layer { name: "in" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } shape { dim: 2 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "fc" type: "InnerProduct" bottom: "conv" top: "fc"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
)";
}

// A directory of this process's own for a target that must hand its input to a reader as a file (made once, under
// /tmp, named for the target; /tmp itself if it cannot be made).
inline std::string TempDir(const std::string& target) {
  std::string pattern = "/tmp/strata_fuzz_" + target + "_XXXXXX";
  const char* made = mkdtemp(pattern.data());
  return made ? std::string(made) : std::string("/tmp");
}

}  // namespace fuzz
}  // namespace strata

// Each target includes this header once; libFuzzer calls this before the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  strata::fuzz::Init();
  return 0;
}
