// Device memory for blobs (SyncedMemory), private to src/strata: stream-ordered allocations on the compute stream
// from the device's memory pool, which keeps freed blocks for the next allocation, as PyTorch's caching allocator
// does. cudaFree waits for the whole device; a Reversible block or a recomputation plan frees and reallocates its
// activations every pass, and those waits serialised the host with the GPU (docs/gpu.md, "How it works": Memory).
#pragma once

#ifdef STRATA_USE_CUDA

#include <cstddef>

namespace strata {
namespace cuda {

// `bytes` of device memory, usable by the compute stream's work queued after this call (and by other streams
// that wait for that work). Where the pool's cached blocks stand between the request and free memory, they are
// given back to the device first. Throws an Error when the device has not the memory.
void* device_alloc(size_t bytes);
// Returns `ptr` to the pool once the compute stream's work queued before this call is done. Never throws.
void device_free(void* ptr) noexcept;
// Gives the pool's cached blocks back to the device (after waiting for it): for allocations outside the pool
// (cuDNN's workspace) that found the device full.
void trim_device_pool();

}  // namespace cuda
}  // namespace strata

#endif
