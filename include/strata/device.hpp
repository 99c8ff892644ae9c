// The GPU as the tools and the solver see it: how many devices there are, which one this process uses, and the
// process-wide GPU options. Callable in every build: without CUDA, gpu_device_count() is 0 and selecting a
// device throws an Error, so the tools need no #ifdef.
#pragma once

#include <cstddef>
#include <string>

namespace strata {

// Devices the CUDA runtime reports (0 in a CPU-only build, or when the driver finds none).
int gpu_device_count();
// True when this build has the GPU backend compiled in.
bool gpu_build();

// This process's rank among the processes on its node, from the MPI launcher's environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MV2_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...); 0 when not launched by one.
int local_rank();

// Binds this process (and every thread that later uses the GPU) to a device and returns it: `requested` when it
// is >= 0, else local_rank() modulo the device count, so ranks sharing a node spread over its GPUs. Must run
// before any other CUDA call (and before MPI_Init, which a CUDA-aware MPI may use to pick its device). Throws an
// Error when there is no such device or the build has no GPU support.
int select_gpu_device(int requested);
// The device select_gpu_device chose (-1 before).
int selected_gpu_device();
// Makes the calling thread use that device (a new thread starts on device 0). A no-op before selection and in a
// CPU-only build. Threads that launch GPU work call it first.
void bind_gpu_thread();

// A human-readable summary of one device (name, compute capability, memory, multiprocessors, clocks), for
// `strata device_query` and the logs.
std::string gpu_device_report(int device);

// Whether the current device computes in bfloat16 on tensor cores (compute capability 8.0, Ampere, or later):
// where it does not, layers asked for precision: BF16 on the GPU compute in float. False without a device.
bool gpu_has_bf16();
// Whether the current device has float16 arithmetic (compute capability 5.3 or later; tensor cores from 7.0, Volta):
// where it does not, layers asked for precision: FP16 on the GPU compute in float. False without a device.
bool gpu_has_fp16();

// Waits for all work queued on the current device; a no-op in a CPU-only build. For timing.
void gpu_synchronize();

struct GpuOptions {
  // Let cuBLAS and cuDNN use TF32 tensor cores for float (10-bit mantissa products): much faster, about 1e-3
  // relative error instead of 1e-6. Off by default so that GPU results match the CPU's.
  bool allow_tf32 = false;
  // Choose only deterministic cuDNN algorithms, so repeated runs give bit-identical gradients.
  bool deterministic = false;
  // Which convolutions compute with their activations channels-last (NHWC), which cuDNN's tensor-core kernels read
  // without a transpose, the layers after them keeping that layout (docs/gpu.md, "Channels-last"): those in
  // 16 bits (precision: BF16 or FP16; the default), all of them (float ones too, as a PyTorch user's channels_last
  // memory format: opt in until a GPU run has measured it), or none (every activation channels-first).
  enum class ChannelsLast { kNone, k16Bit, kAll };
  ChannelsLast channels_last = ChannelsLast::k16Bit;
  bool channels_last_for(bool in_16bit) const {
    return channels_last == ChannelsLast::kAll || (in_16bit && channels_last == ChannelsLast::k16Bit);
  }
  // The most device memory one convolution algorithm may use as workspace.
  size_t workspace_limit = size_t(1) << 30;
};
GpuOptions& gpu_options();

}  // namespace strata
