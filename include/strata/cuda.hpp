// The CUDA side of Strata, for code compiled only in GPU builds (.cu files and #ifdef STRATA_USE_CUDA blocks):
// error checks, the calling thread's cuBLAS and cuDNN handles, a reusable device workspace, and the launch
// helpers the kernels share.
//
// All GPU work runs on the legacy default stream, so it is ordered with the synchronous cudaMemcpy of
// SyncedMemory's lazy copies without any further synchronisation. The one exception is data-parallel training's
// gradient path (strata/engine/gradient_staging.hpp), whose copy and NCCL streams order themselves against it with
// events (docs/gpu.md).
#pragma once

#ifdef STRATA_USE_CUDA

#include <cublas_v2.h>
#include <cusolverDn.h>
#include <cuda_runtime.h>
#ifdef STRATA_USE_CUDNN
#include <cudnn.h>
#endif

#include <algorithm>
#include <cstddef>
#include <string>

#include "strata/common.hpp"
#include "strata/device.hpp"

namespace strata {
namespace cuda {

// Throws an Error "CUDA error at file:line: expr: message". A failed CUDA call is almost always out of memory,
// a missing or busy device, or a driver/runtime mismatch: conditions of the machine rather than bugs, so they
// end the tool with one clear message instead of a glog abort.
[[noreturn]] void fail(const char* what, const char* expr, const std::string& message, const char* file, int line);
const char* cublas_status_string(cublasStatus_t status);
const char* cusolver_status_string(cusolverStatus_t status);
#ifdef STRATA_USE_CUDNN
const char* cudnn_status_string(cudnnStatus_t status);
#endif

// The calling thread's handles, created on first use (on the device select_gpu_device chose). cuBLAS's math
// mode follows gpu_options().allow_tf32 at every call.
cublasHandle_t cublas();
cusolverDnHandle_t cusolver();
#ifdef STRATA_USE_CUDNN
cudnnHandle_t cudnn();
#endif

// Device scratch memory of at least `bytes` for the calling thread, valid until its next call (it grows, never
// shrinks). Convolution workspaces and reductions use it.
void* workspace(size_t bytes);

// Threads per block for the element-wise kernels, and a grid that covers n elements with grid-stride loops (the
// cap keeps huge tensors from asking for more blocks than is useful; each thread then handles several).
constexpr int kThreads = 256;
inline int blocks(long long n) {
  const long long b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max(1LL, std::min(b, 65536LL)));
}

}  // namespace cuda
}  // namespace strata

#define STRATA_CUDA_CHECK(expr)                                                               \
  do {                                                                                        \
    const cudaError_t strata_err_ = (expr);                                                   \
    if (strata_err_ != cudaSuccess)                                                           \
      ::strata::cuda::fail("CUDA", #expr, cudaGetErrorString(strata_err_), __FILE__, __LINE__); \
  } while (0)

// A library call's status against its success value; a failure names the library, the call and the status.
#define STRATA_STATUS_CHECK(library, status_type, success, to_string, expr)                  \
  do {                                                                                    \
    const status_type strata_st_ = (expr);                                                \
    if (strata_st_ != (success))                                                          \
      ::strata::cuda::fail(library, #expr, to_string(strata_st_), __FILE__, __LINE__);     \
  } while (0)

#define STRATA_CUBLAS_CHECK(expr) \
  STRATA_STATUS_CHECK("cuBLAS", cublasStatus_t, CUBLAS_STATUS_SUCCESS, ::strata::cuda::cublas_status_string, expr)
#define STRATA_CUSOLVER_CHECK(expr)                                       \
  STRATA_STATUS_CHECK("cuSOLVER", cusolverStatus_t, CUSOLVER_STATUS_SUCCESS, \
                      ::strata::cuda::cusolver_status_string, expr)
#ifdef STRATA_USE_CUDNN
#define STRATA_CUDNN_CHECK(expr) \
  STRATA_STATUS_CHECK("cuDNN", cudnnStatus_t, CUDNN_STATUS_SUCCESS, ::strata::cuda::cudnn_status_string, expr)
#endif

// After every kernel launch: a bad launch configuration shows up here, not at some later unrelated call.
#define STRATA_CUDA_KERNEL_CHECK() STRATA_CUDA_CHECK(cudaPeekAtLastError())

#ifdef __CUDACC__
// A grid-stride loop over [0, n).
#define STRATA_KERNEL_LOOP(i, n)                                                              \
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<long long>(blockDim.x) * gridDim.x)
#endif

// Explicit instantiation of a layer's GPU members (the class itself is instantiated in its .cpp).
#define STRATA_INSTANTIATE_LAYER_GPU_FUNCS(classname)                                                          \
  template void classname<float>::Forward_gpu(const std::vector<Blob<float>*>&,                                \
                                              const std::vector<Blob<float>*>&);                               \
  template void classname<double>::Forward_gpu(const std::vector<Blob<double>*>&,                              \
                                               const std::vector<Blob<double>*>&);                             \
  template void classname<float>::Backward_gpu(const std::vector<Blob<float>*>&, const std::vector<bool>&,     \
                                               const std::vector<Blob<float>*>&);                              \
  template void classname<double>::Backward_gpu(const std::vector<Blob<double>*>&, const std::vector<bool>&,   \
                                                const std::vector<Blob<double>*>&)

#endif  // STRATA_USE_CUDA
