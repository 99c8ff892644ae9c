// cuBLAS, cuSOLVER, cuDNN and NCCL, opened the first time a GPU path calls them, not when libstrata loads (private to
// src/strata). libstrata links only the CUDA runtime; these are dlopen'ed, because cuBLAS (with cuBLASLt) alone
// is about 150 MB of a process's resident memory once loaded, which a CPU run of a CUDA build should not pay
// (docs/gpu.md, "How it works"). Each library is a table of the functions Strata calls, typed by their own
// headers' declarations: `cuda::cublas_api().cublasSgemm(...)` calls cuBLAS's cublasSgemm_v2.
#pragma once

#ifdef STRATA_USE_CUDA

#include <cublas_v2.h>
#include <cusolverDn.h>
#ifdef STRATA_USE_CUDNN
#include <cudnn.h>
#endif
#ifdef STRATA_HAVE_NCCL
#include <nccl.h>
#endif

namespace strata {
namespace cuda {

#define STRATA_CUBLAS_FUNCTIONS(X)                                                                        \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetMathMode) X(cublasSgemm_v2) X(cublasDgemm_v2)          \
  X(cublasSgemv_v2) X(cublasDgemv_v2) X(cublasSaxpy_v2) X(cublasDaxpy_v2) X(cublasSscal_v2) X(cublasDscal_v2) \
  X(cublasSdot_v2) X(cublasDdot_v2) X(cublasSasum_v2) X(cublasDasum_v2)

// The dense eigen- and Cholesky solvers, in double: K-FAC's inversions on the device (docs/kfac.md).
#define STRATA_CUSOLVER_FUNCTIONS(X)                                                                      \
  X(cusolverGetProperty) X(cusolverDnCreate) X(cusolverDnDestroy) X(cusolverDnDpotrf_bufferSize)           \
  X(cusolverDnDpotrf) X(cusolverDnDpotri_bufferSize) X(cusolverDnDpotri) X(cusolverDnDsyevd_bufferSize)    \
  X(cusolverDnDsyevd)

#define STRATA_CUDNN_FUNCTIONS(X)                                                                         \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy)                                   \
  X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnSetTensor4dDescriptor)               \
  X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)               \
  X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                                   \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)         \
  X(cudnnFindConvolutionForwardAlgorithm) X(cudnnFindConvolutionBackwardDataAlgorithm)                       \
  X(cudnnFindConvolutionBackwardFilterAlgorithm) X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData)  \
  X(cudnnConvolutionBackwardFilter) X(cudnnConvolutionBackwardBias) X(cudnnAddTensor)

#define STRATA_NCCL_FUNCTIONS(X)                                                                          \
  X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy)        \
  X(ncclAllReduce) X(ncclGroupStart) X(ncclGroupEnd)

#define STRATA_LIBRARY_MEMBER(name) decltype(&::name) name = nullptr;

// cublasGemmEx is overloaded in C++ (cuBLAS's header adds an inline form taking the old cudaDataType compute
// type), so its type is spelled out: the library's own function.
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                          const void*, void*, cudaDataType, int, cublasComputeType_t,
                                          cublasGemmAlgo_t);

struct CublasApi {
  STRATA_CUBLAS_FUNCTIONS(STRATA_LIBRARY_MEMBER)
  CublasGemmExFn cublasGemmEx = nullptr;
};
// cuBLAS's table, the library opened on the first call (thread-safe); a library that cannot be opened, or lacks
// a function, is an Error naming it.
const CublasApi& cublas_api();

struct CusolverApi {
  STRATA_CUSOLVER_FUNCTIONS(STRATA_LIBRARY_MEMBER)
};
const CusolverApi& cusolver_api();

#ifdef STRATA_USE_CUDNN
struct CudnnApi {
  STRATA_CUDNN_FUNCTIONS(STRATA_LIBRARY_MEMBER)
};
const CudnnApi& cudnn_api();
#endif

#ifdef STRATA_HAVE_NCCL
struct NcclApi {
  STRATA_NCCL_FUNCTIONS(STRATA_LIBRARY_MEMBER)
};
const NcclApi& nccl_api();
#endif

#undef STRATA_LIBRARY_MEMBER

}  // namespace cuda
}  // namespace strata

// Calls the library's function `fn` with the arguments that follow and checks its status with strata/cuda.hpp's
// checks, which the file using them includes (this header sits below cuda.hpp in the layering, for device.cpp).
#define STRATA_CUBLAS(fn, ...) STRATA_CUBLAS_CHECK(::strata::cuda::cublas_api().fn(__VA_ARGS__))
#define STRATA_CUSOLVER(fn, ...) STRATA_CUSOLVER_CHECK(::strata::cuda::cusolver_api().fn(__VA_ARGS__))
#ifdef STRATA_USE_CUDNN
#define STRATA_CUDNN(fn, ...) STRATA_CUDNN_CHECK(::strata::cuda::cudnn_api().fn(__VA_ARGS__))
#endif
#ifdef STRATA_HAVE_NCCL
#define STRATA_NCCL(fn, ...)                                                                                \
  do {                                                                                                    \
    const ::strata::cuda::NcclApi& strata_nccl_api_ = ::strata::cuda::nccl_api();                          \
    const ncclResult_t strata_nccl_ = strata_nccl_api_.fn(__VA_ARGS__);                                    \
    if (strata_nccl_ != ncclSuccess) {                                                                    \
      ::strata::cuda::fail("NCCL", #fn, strata_nccl_api_.ncclGetErrorString(strata_nccl_), __FILE__, __LINE__); \
    }                                                                                                     \
  } while (0)
#endif

#endif  // STRATA_USE_CUDA
