#include "cuda_libraries.hpp"

#ifdef STRATA_USE_CUDA

#include <dlfcn.h>

#include <string>

#include "strata/common.hpp"

namespace strata {
namespace cuda {
namespace {

#define STRATA_STRINGIFY_(x) #x
#define STRATA_STRINGIFY(x) STRATA_STRINGIFY_(x)

// Opens `soname` as the loader would have at start-up (LD_LIBRARY_PATH, then libstrata's run path, which holds the
// folder CMake found the library in, then the system's) and fills `api` from it; `what` names it in errors.
template <typename Api, typename Fill>
Api Load(const char* what, const char* soname, Fill fill) {
  void* library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    STRATA_FAIL() << "cannot load " << what << " (" << soname
                  << "), which this GPU run needs: " << (why ? why : "dlopen failed");
  }
  Api api;
  fill(&api, [&](const char* name) {
    void* f = dlsym(library, name);
    STRATA_REQUIRE(f != nullptr) << what << " (" << soname << ") has no function " << name
                                 << ": it is older than the one Strata was built with";
    return f;
  });
  return api;
}

#define STRATA_LIBRARY_FILL(name) api->name = reinterpret_cast<decltype(api->name)>(symbol(#name));

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api =
      Load<CublasApi>("cuBLAS", "libcublas.so." STRATA_STRINGIFY(CUBLAS_VER_MAJOR),
                      [](CublasApi* api, auto symbol) {
                        STRATA_CUBLAS_FUNCTIONS(STRATA_LIBRARY_FILL)
                        STRATA_LIBRARY_FILL(cublasGemmEx)
                      });
  return api;
}

const CusolverApi& cusolver_api() {
  static const CusolverApi api =
      Load<CusolverApi>("cuSOLVER", "libcusolver.so." STRATA_STRINGIFY(CUSOLVER_VER_MAJOR),
                        [](CusolverApi* api, auto symbol) { STRATA_CUSOLVER_FUNCTIONS(STRATA_LIBRARY_FILL) });
  return api;
}

#ifdef STRATA_USE_CUDNN
const CudnnApi& cudnn_api() {
  static const CudnnApi api =
      Load<CudnnApi>("cuDNN", "libcudnn.so." STRATA_STRINGIFY(CUDNN_MAJOR),
                     [](CudnnApi* api, auto symbol) { STRATA_CUDNN_FUNCTIONS(STRATA_LIBRARY_FILL) });
  return api;
}
#endif

#ifdef STRATA_HAVE_NCCL
const NcclApi& nccl_api() {
  static const NcclApi api =
      Load<NcclApi>("NCCL", "libnccl.so." STRATA_STRINGIFY(NCCL_MAJOR),
                    [](NcclApi* api, auto symbol) { STRATA_NCCL_FUNCTIONS(STRATA_LIBRARY_FILL) });
  return api;
}
#endif

}  // namespace cuda
}  // namespace strata

#endif  // STRATA_USE_CUDA
