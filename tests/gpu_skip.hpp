// Why a GPU test cannot run here, for its skip message; "" where it can, after selecting a device (the local
// rank's under mpirun, as `strata train` does). Every rank of a job on one machine sees the same, so they all
// skip or all run.
#pragma once

#include <string>

#include "strata/device.hpp"

namespace strata {

inline std::string WhyNoGpu() {
  if (!gpu_build()) return "this build has no GPU support (no CUDA toolkit at build time)";
  if (gpu_device_count() == 0) {
    return "no GPU: cudaGetDeviceCount reports none on this machine; these tests run on a GPU machine";
  }
  if (selected_gpu_device() < 0) select_gpu_device(-1);
  return "";
}

}  // namespace strata
