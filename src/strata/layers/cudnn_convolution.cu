#ifdef STRATA_USE_CUDNN

#include "cudnn_convolution.cuh"

#include "../device_memory.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <sstream>

namespace strata {
namespace cudnn_conv {

namespace {

std::mutex g_cache_mutex;
// By shape: the algorithms, or (channels-last only) none, when a direction has none there.
std::map<std::string, std::optional<Algorithms>> g_cache;

template <typename Dtype>
cudnnDataType_t data_type() {
  return sizeof(Dtype) == 4 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

// The first (fastest: cuDNN sorts by time) usable result of a Find call, or null. Without TF32, a result measured
// with FMA math is preferred: the descriptors asked for it, and the run uses the math type of the chosen result.
template <typename Perf>
const Perf* pick(const Perf* perf, int returned, bool in_16bit) {
  const GpuOptions& o = gpu_options();
  const bool prefer_fma = !o.allow_tf32 && !in_16bit;  // 16-bit types are on tensor cores by design
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > o.workspace_limit) continue;
      if (o.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      if (pass == 0 && prefer_fma && perf[i].mathType != CUDNN_FMA_MATH) continue;
      return &perf[i];
    }
  }
  return nullptr;
}

// One Find call. cuDNN allocates the buffers it measures on itself, outside the stream-ordered pool, which may hold
// the free memory: on CUDNN_STATUS_ALLOC_FAILED the pool gives its cached blocks back and the call runs once more.
// A description cuDNN rejects outright is, for channels-last (`optional`), a direction without an algorithm.
template <typename Find>
bool run_find(Find find, bool optional) {
  cudnnStatus_t s = find();
  if (s == CUDNN_STATUS_ALLOC_FAILED) {
    (void)cudaGetLastError();  // the failed cudaMalloc's error, which the next kernel check would otherwise report
    cuda::trim_device_pool();
    s = find();
  }
  if (s != CUDNN_STATUS_SUCCESS) (void)cudaGetLastError();
  if (s != CUDNN_STATUS_SUCCESS && optional) return false;
  STRATA_CUDNN_CHECK(s);
  return true;
}

// Measures the three directions' algorithms on the described shape; `missing` names a direction without one.
Algorithms find_algorithms(const Convolution& c, const std::string& key, bool in_16bit, bool optional,
                           const char** missing) {
  const cuda::CudnnApi& dnn = cuda::cudnn_api();
  Algorithms a{};
  cudnnHandle_t h = cuda::cudnn();
  int returned = 0;
  *missing = nullptr;
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  const bool found_fwd = run_find([&] {
    return dnn.cudnnFindConvolutionForwardAlgorithm(h, c.x, c.w, c.fwd, c.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                    &returned, fp);
  }, optional);
  const auto* f = found_fwd ? pick(fp, returned, in_16bit) : nullptr;
  if (!f) {
    *missing = "forward";
    return a;
  }
  a.fwd = f->algo;
  a.fwd_math = f->mathType;
  a.fwd_bytes = f->memory;
  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  const bool found_data = run_find([&] {
    return dnn.cudnnFindConvolutionBackwardDataAlgorithm(h, c.w, c.y, c.bwd_data, c.x,
                                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, dp);
  }, optional);
  const auto* d = found_data ? pick(dp, returned, in_16bit) : nullptr;
  if (!d) {
    *missing = "backward-data";
    return a;
  }
  a.bwd_data = d->algo;
  a.bwd_data_math = d->mathType;
  a.bwd_data_bytes = d->memory;
  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  const bool found_filter = run_find([&] {
    return dnn.cudnnFindConvolutionBackwardFilterAlgorithm(h, c.x, c.y, c.bwd_filter, c.w,
                                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, wp);
  }, optional);
  const auto* wf = found_filter ? pick(wp, returned, in_16bit) : nullptr;
  if (!wf) {
    *missing = "backward-filter";
    return a;
  }
  a.bwd_filter = wf->algo;
  a.bwd_filter_math = wf->mathType;
  a.bwd_filter_bytes = wf->memory;
  VLOG(1) << "cuDNN algorithms for " << key << ": forward " << a.fwd << ", backward data " << a.bwd_data
          << ", backward filter " << a.bwd_filter << "; math types " << a.fwd_math << ", " << a.bwd_data_math << ", "
          << a.bwd_filter_math << " (" << CUDNN_TENSOR_OP_MATH << ": tensor cores)";
  return a;
}

}  // namespace

Convolution::Convolution() {
  STRATA_CUDNN(cudnnCreateTensorDescriptor, &x);
  STRATA_CUDNN(cudnnCreateTensorDescriptor, &y);
  STRATA_CUDNN(cudnnCreateTensorDescriptor, &x_bias);
  STRATA_CUDNN(cudnnCreateTensorDescriptor, &y_bias);
  STRATA_CUDNN(cudnnCreateFilterDescriptor, &w);
  STRATA_CUDNN(cudnnCreateConvolutionDescriptor, &fwd);
  STRATA_CUDNN(cudnnCreateConvolutionDescriptor, &bwd_data);
  STRATA_CUDNN(cudnnCreateConvolutionDescriptor, &bwd_filter);
}

Convolution::~Convolution() {
  const cuda::CudnnApi& dnn = cuda::cudnn_api();
  dnn.cudnnDestroyTensorDescriptor(x);
  dnn.cudnnDestroyTensorDescriptor(y);
  dnn.cudnnDestroyTensorDescriptor(x_bias);
  dnn.cudnnDestroyTensorDescriptor(y_bias);
  dnn.cudnnDestroyFilterDescriptor(w);
  dnn.cudnnDestroyConvolutionDescriptor(fwd);
  dnn.cudnnDestroyConvolutionDescriptor(bwd_data);
  dnn.cudnnDestroyConvolutionDescriptor(bwd_filter);
}

template <typename Dtype>
bool configure(Convolution* c, const ConvGeometry& g, int num, int num_output, int group, ElementType stored,
               bool channels_last) {
  const GpuOptions& o = gpu_options();
  const bool in_16bit = stored != ElementType::kOwn;
  CHECK(!in_16bit || sizeof(Dtype) == 4) << "16-bit convolutions are for float nets";
  CHECK(!channels_last || sizeof(Dtype) == 4) << "channels-last convolutions are for float nets";
  const int out_h = g.out_h(), out_w = g.out_w();
  std::ostringstream k;
  k << (in_16bit ? element_type_name(stored) : sizeof(Dtype) == 4 ? "float" : "double") << (channels_last ? " NHWC" : "")
    << " x " << num << "x" << g.channels << "x"
    << g.height << "x" << g.width << " w " << num_output << "x" << g.channels / group << "x" << g.kernel_h << "x"
    << g.kernel_w
    << " pad " << g.pad_h << "," << g.pad_w << " stride " << g.stride_h << "," << g.stride_w << " dilation "
    << g.dilation_h << "," << g.dilation_w << " group " << group << (o.allow_tf32 ? " tf32" : "")
    << (o.deterministic ? " deterministic" : "") << " limit " << o.workspace_limit;
  const std::string key = k.str();
  if (c->key == key) return true;
  std::optional<Algorithms> found;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      found = it->second;
      cached = true;
    }
  }
  // A channels-last shape known to have no algorithm leaves the descriptors as they are, for the channels-first call
  // that follows.
  if (cached && !found) return false;
  c->key.clear();  // set again only once the algorithms are chosen (a failed Find must not leave them stale)
  const cudnnDataType_t b = data_type<Dtype>();  // the bias's and the sums' type
  const cudnnDataType_t t = stored == ElementType::kBf16   ? CUDNN_DATA_BFLOAT16
                            : stored == ElementType::kFp16 ? CUDNN_DATA_HALF
                                                           : b;
  const cudnnTensorFormat_t order = channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  STRATA_CUDNN(cudnnSetTensor4dDescriptor, c->x, order, t, num, g.channels, g.height, g.width);
  STRATA_CUDNN(cudnnSetTensor4dDescriptor, c->y, order, t, num, num_output, out_h, out_w);
  STRATA_CUDNN(cudnnSetTensor4dDescriptor, c->x_bias, CUDNN_TENSOR_NCHW, b, 1, g.channels, 1, 1);
  STRATA_CUDNN(cudnnSetTensor4dDescriptor, c->y_bias, CUDNN_TENSOR_NCHW, b, 1, num_output, 1, 1);
  STRATA_CUDNN(cudnnSetFilter4dDescriptor, c->w, t, order, num_output, g.channels / group, g.kernel_h,
               g.kernel_w);
  // FMA math keeps float products in float; DEFAULT lets cuDNN convert float to TF32 on tensor cores. 16 bits ask
  // for tensor-core math: under DEFAULT, Find would not try those kernels for 16-bit data (cuDNN's legacy API).
  const cudnnMathType_t math = in_16bit                               ? CUDNN_TENSOR_OP_MATH
                               : o.allow_tf32 && sizeof(Dtype) == 4 ? CUDNN_DEFAULT_MATH
                                                                      : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t d : {c->fwd, c->bwd_data, c->bwd_filter}) {
    STRATA_CUDNN(cudnnSetConvolution2dDescriptor, d, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h,
                 g.dilation_w, CUDNN_CROSS_CORRELATION, b);
    STRATA_CUDNN(cudnnSetConvolutionGroupCount, d, group);
    STRATA_CUDNN(cudnnSetConvolutionMathType, d, math);
  }

  if (!cached) {
    const char* missing = nullptr;
    found = find_algorithms(*c, key, in_16bit, /*optional=*/channels_last, &missing);
    if (missing) {
      // Channels-first is the layout every algorithm takes; channels-last the caller may do without.
      STRATA_REQUIRE(channels_last) << "cuDNN has no " << (o.deterministic ? "deterministic " : "") << missing
                                    << " convolution algorithm within the workspace limit of "
                                    << human_bytes(o.workspace_limit) << " for " << key;
      found.reset();
    }
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    g_cache[key] = found;
  }
  if (!found) return false;
  const Algorithms& a = *found;
  // Run each direction with the math type its algorithm was measured with.
  STRATA_CUDNN(cudnnSetConvolutionMathType, c->fwd, a.fwd_math);
  STRATA_CUDNN(cudnnSetConvolutionMathType, c->bwd_data, a.bwd_data_math);
  STRATA_CUDNN(cudnnSetConvolutionMathType, c->bwd_filter, a.bwd_filter_math);
  c->algo = a;
  c->key = key;
  return true;
}

template bool configure<float>(Convolution*, const ConvGeometry&, int, int, int, ElementType, bool);
template bool configure<double>(Convolution*, const ConvGeometry&, int, int, int, ElementType, bool);

template <typename Dtype>
void configure_pass(Convolution* c, const ConvGeometry& g, int num, int num_output, int group, DeviceFormat* order,
                    const std::string& layer_name, const char* layer_type) {
  const ElementType stored = element_type_of(*order);
  if (is_channels_last(*order)) {
    if (configure<Dtype>(c, g, num, num_output, group, stored, /*channels_last=*/true)) return;
    LOG_IF(WARNING, !c->warned_channels_first)
        << "layer '" << layer_name << "' (" << layer_type << "): cuDNN has no " << format_name(*order)
        << " algorithm for its shape within the limits; it computes channels-first";
    c->warned_channels_first = true;
    *order = device_format_for(stored, /*channels_last=*/false);
  }
  configure<Dtype>(c, g, num, num_output, group, stored);
}

template void configure_pass<float>(Convolution*, const ConvGeometry&, int, int, int, DeviceFormat*,
                                    const std::string&, const char*);
template void configure_pass<double>(Convolution*, const ConvGeometry&, int, int, int, DeviceFormat*,
                                     const std::string&, const char*);

}  // namespace cudnn_conv
}  // namespace strata

#endif  // STRATA_USE_CUDNN
