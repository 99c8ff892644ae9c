// cuBLAS, cuSOLVER, cuDNN and NCCL opened on first use (src/strata/cuda_libraries.hpp): the tables fill from the libraries
// this build was compiled against, with no GPU needed. StrataTool.CpuRunOfAGpuBuildLoadsNoCudaLibraries checks the
// other half: a CPU run opens none of them.
#ifdef STRATA_USE_CUDA

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "strata/cuda_libraries.hpp"

namespace strata {
namespace {

std::string MappedFiles() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream s;
  s << maps.rdbuf();
  return s.str();
}

// Prints the file a function came from, for the record (scripts/gpu_checks.sh keeps these lines).
void SayWhereFrom(const char* library, void* function) {
  Dl_info info{};
  std::printf("%s opened from %s\n", library,
              dladdr(function, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "(unknown)");
}

TEST(CudaLibraries, OpenOnFirstUseWithTheVersionsBuiltAgainst) {
  const cuda::CublasApi& blas = cuda::cublas_api();
  EXPECT_NE(blas.cublasSgemm_v2, nullptr);
  EXPECT_EQ(&blas, &cuda::cublas_api());  // opened once
  EXPECT_NE(MappedFiles().find("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos);
  SayWhereFrom("cuBLAS", reinterpret_cast<void*>(blas.cublasSgemm_v2));
  const cuda::CusolverApi& solver = cuda::cusolver_api();
  int major = 0;
  ASSERT_EQ(solver.cusolverGetProperty(MAJOR_VERSION, &major), CUSOLVER_STATUS_SUCCESS);
  EXPECT_EQ(major, CUSOLVER_VER_MAJOR);
  SayWhereFrom("cuSOLVER", reinterpret_cast<void*>(solver.cusolverGetProperty));
#ifdef STRATA_USE_CUDNN
  const cuda::CudnnApi& dnn = cuda::cudnn_api();
  EXPECT_EQ(dnn.cudnnGetVersion() / 10000, static_cast<size_t>(CUDNN_MAJOR));
  EXPECT_STREQ(dnn.cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  SayWhereFrom("cuDNN", reinterpret_cast<void*>(dnn.cudnnGetVersion));
#endif
#ifdef STRATA_HAVE_NCCL
  int version = 0;
  ASSERT_EQ(cuda::nccl_api().ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR);
  SayWhereFrom("NCCL", reinterpret_cast<void*>(cuda::nccl_api().ncclGetVersion));
#endif
}

}  // namespace
}  // namespace strata

#endif  // STRATA_USE_CUDA
