#include "strata/device.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "device_memory.hpp"
#include "strata/common.hpp"
#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {

namespace {
int g_selected_device = -1;
}  // namespace

GpuOptions& gpu_options() {
  static GpuOptions options;
  return options;
}

int local_rank() {
  // Open MPI, MPICH/MVAPICH, Slurm, PMIx: whichever launcher started us says where we are on the node.
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                           "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

int selected_gpu_device() { return g_selected_device; }

#ifdef STRATA_USE_CUDA

bool gpu_build() { return true; }

int gpu_device_count() {
  int n = 0;
  // No driver, or no device, is not an error here: the caller decides (tests skip, tools refuse GPU mode).
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int select_gpu_device(int requested) {
  const int count = gpu_device_count();
  STRATA_REQUIRE(count > 0) << "GPU mode was requested, but the CUDA runtime finds no GPU on this machine";
  const int device = requested >= 0 ? requested : local_rank() % count;
  STRATA_REQUIRE(device < count) << "GPU " << device << " was requested, but this machine has " << count
                                 << " GPU" << (count == 1 ? "" : "s") << " (0.." << count - 1 << ")";
  STRATA_CUDA_CHECK(cudaSetDevice(device));
  g_selected_device = device;
  return device;
}

namespace {

// The current device's compute capability as 10 * major + minor, 0 without one. Asked by every 16-bit layer in every
// pass: the answer is kept per device (0: not asked yet).
int current_compute_capability() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const bool cacheable = device >= 0 && device < kDevices;
  if (cacheable && known[device].load(std::memory_order_relaxed) != 0) return known[device].load();
  int major = 0, minor = 0;
  if (gpu_device_count() == 0 ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const int cc = 10 * major + minor;
  if (cacheable) known[device].store(cc);
  return cc;
}

}  // namespace

bool gpu_has_bf16() { return current_compute_capability() >= 80; }
bool gpu_has_fp16() { return current_compute_capability() >= 53; }

std::string gpu_device_report(int device) {
  cudaDeviceProp p;
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int clock_khz = 0, mem_clock_khz = 0, bus_width = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, device);
  std::ostringstream s;
  s << "Device id:                     " << device << "\n"
    << "Name:                          " << p.name << "\n"
    << "Compute capability:            " << p.major << "." << p.minor << "\n"
    << "Total global memory:           " << human_bytes(static_cast<double>(p.totalGlobalMem)) << "\n"
    << "Multiprocessors:               " << p.multiProcessorCount << "\n"
    << "L2 cache:                      " << human_bytes(p.l2CacheSize) << "\n"
    << "Shared memory per block (opt-in): " << human_bytes(static_cast<double>(p.sharedMemPerBlockOptin)) << "\n"
    << "Clock rate:                    " << clock_khz / 1000 << " MHz\n"
    << "Memory clock / bus width:      " << mem_clock_khz / 1000 << " MHz / " << bus_width << " bit\n"
    << "Driver / runtime version:      " << driver / 1000 << "." << (driver % 1000) / 10 << " / "
    << runtime / 1000 << "." << (runtime % 1000) / 10 << "\n";
#ifdef STRATA_USE_CUDNN
  const size_t v = cuda::cudnn_api().cudnnGetVersion();
  s << "cuDNN version:                 " << v / 10000 << "." << (v % 10000) / 100 << "." << v % 100 << "\n";
#endif
  return s.str();
}

void gpu_synchronize() {
  if (g_selected_device >= 0) STRATA_CUDA_CHECK(cudaDeviceSynchronize());
}

void bind_gpu_thread() {
  if (g_selected_device >= 0) STRATA_CUDA_CHECK(cudaSetDevice(g_selected_device));
}

namespace cuda {

void fail(const char* what, const char* expr, const std::string& message, const char* file, int line) {
  std::ostringstream s;
  s << what << " error at " << file << ":" << line << ": " << expr << ": " << message;
  throw Error(s.str());
}

const char* cublas_status_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

const char* cusolver_status_string(cusolverStatus_t status) {
  switch (status) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "unknown cuSOLVER status";
  }
}

#ifdef STRATA_USE_CUDNN
const char* cudnn_status_string(cudnnStatus_t status) { return cudnn_api().cudnnGetErrorString(status); }
#endif

namespace {

// One per thread that touches the GPU. Destroyed at thread exit; at process exit the driver may already be
// gone, so failures there are ignored.
struct ThreadState {
  cublasHandle_t cublas = nullptr;
  cusolverDnHandle_t cusolver = nullptr;
#ifdef STRATA_USE_CUDNN
  cudnnHandle_t cudnn = nullptr;
#endif
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  ThreadState() {
    // A thread other than the one that selected the device starts on device 0: move it to ours.
    if (g_selected_device >= 0) STRATA_CUDA_CHECK(cudaSetDevice(g_selected_device));
  }
  ~ThreadState() {
    if (cublas) cublas_api().cublasDestroy(cublas);
    if (cusolver) cusolver_api().cusolverDnDestroy(cusolver);
#ifdef STRATA_USE_CUDNN
    if (cudnn) cudnn_api().cudnnDestroy(cudnn);
#endif
    if (workspace) {
      cudaFree(workspace);
      MemoryTracker::released(MemoryCategory::kWorkspace, workspace_bytes, MemorySpace::kDevice);
    }
  }
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

}  // namespace

cublasHandle_t cublas() {
  ThreadState& s = state();
  if (s.cublas == nullptr) STRATA_CUBLAS(cublasCreate, &s.cublas);
  // Sums in float even where the output is bfloat16 (a split-K GEMM would otherwise round each partial sum).
  const int math = (gpu_options().allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  STRATA_CUBLAS(cublasSetMathMode, s.cublas, static_cast<cublasMath_t>(math));
  return s.cublas;
}

cusolverDnHandle_t cusolver() {
  ThreadState& s = state();
  if (s.cusolver == nullptr) STRATA_CUSOLVER(cusolverDnCreate, &s.cusolver);  // on the default stream
  return s.cusolver;
}

#ifdef STRATA_USE_CUDNN
cudnnHandle_t cudnn() {
  ThreadState& s = state();
  if (s.cudnn == nullptr) STRATA_CUDNN(cudnnCreate, &s.cudnn);
  return s.cudnn;
}
#endif

void* workspace(size_t bytes) {
  ThreadState& s = state();
  if (bytes > s.workspace_bytes) {
    if (s.workspace) {
      STRATA_CUDA_CHECK(cudaFree(s.workspace));
      MemoryTracker::released(MemoryCategory::kWorkspace, s.workspace_bytes, MemorySpace::kDevice);
    }
    s.workspace = nullptr;
    s.workspace_bytes = 0;
    // Round up so that slowly growing requests do not reallocate every time.
    const size_t rounded = (bytes + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
    if (cudaMalloc(&s.workspace, rounded) == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      trim_device_pool();  // the blobs' pool may hold what is missing
      s.workspace = nullptr;
      STRATA_CUDA_CHECK(cudaMalloc(&s.workspace, rounded));
    }
    s.workspace_bytes = rounded;
    MemoryTracker::allocated(MemoryCategory::kWorkspace, rounded, MemorySpace::kDevice);
  }
  return s.workspace;
}

namespace {

// The device's default memory pool, set to keep what is freed (its default gives memory back to the device at
// every synchronisation); null where the device has no pools (then plain cudaMalloc and cudaFree). One device
// per process (select_gpu_device), so the first allocation's device is the one.
cudaMemPool_t blob_pool() {
  static const cudaMemPool_t pool = [] {
    int device = 0, supported = 0;
    STRATA_CUDA_CHECK(cudaGetDevice(&device));
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported) {
      cudaGetLastError();
      return cudaMemPool_t{nullptr};
    }
    cudaMemPool_t p = nullptr;
    STRATA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&p, device));
    uint64_t keep = UINT64_MAX;
    STRATA_CUDA_CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep));
    return p;
  }();
  return pool;
}

}  // namespace

void* device_alloc(size_t bytes) {
  void* ptr = nullptr;
  if (blob_pool() == nullptr) {
    STRATA_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    return ptr;
  }
  bytes = std::max<size_t>(bytes, 1);  // the pool refuses empty requests; cudaMalloc returned null for them
  cudaError_t err = cudaMallocAsync(&ptr, bytes, cudaStreamLegacy);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    trim_device_pool();
    err = cudaMallocAsync(&ptr, bytes, cudaStreamLegacy);
  }
  STRATA_CUDA_CHECK(err);
  return ptr;
}

void device_free(void* ptr) noexcept {
  // Never throw from here (destructors): report and carry on. blob_pool() was set up by the allocation.
  const cudaError_t err = blob_pool() ? cudaFreeAsync(ptr, cudaStreamLegacy) : cudaFree(ptr);
  if (err != cudaSuccess) LOG(ERROR) << "freeing device memory: " << cudaGetErrorString(err);
}

void trim_device_pool() {
  if (blob_pool() == nullptr) return;
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());  // blocks freed in stream order are free once their stream is there
  STRATA_CUDA_CHECK(cudaMemPoolTrimTo(blob_pool(), 0));
}

}  // namespace cuda

#else  // !STRATA_USE_CUDA

bool gpu_build() { return false; }
int gpu_device_count() { return 0; }

int select_gpu_device(int) {
  STRATA_FAIL() << "GPU mode was requested, but this build of Strata has no GPU support (no CUDA toolkit was "
                   "found when it was built); rebuild with CUDA or run on the CPU";
  return -1;
}

bool gpu_has_bf16() { return false; }
bool gpu_has_fp16() { return false; }

std::string gpu_device_report(int) {
  STRATA_FAIL() << "this build of Strata has no GPU support";
  return {};
}

void gpu_synchronize() {}
void bind_gpu_thread() {}

#endif  // STRATA_USE_CUDA

}  // namespace strata
