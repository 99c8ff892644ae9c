// Convolution on the GPU through cuDNN's convolution API.
//
// The algorithm for each direction (forward, backward data, backward filter) is chosen by measurement: cuDNN runs
// every algorithm on the layer's shape once, and the fastest whose workspace fits gpu_options().workspace_limit
// (and, with gpu_options().deterministic, whose result does not depend on scheduling) is kept. Measuring takes
// tens of milliseconds per shape, so the choice is cached process-wide by shape: the many identical convolutions
// of a ResNet, a net's TRAIN and TEST copies and repeated Reshapes measure once. Without TF32 the math is
// restricted to FMA (no tensor-core conversion), so results agree with the CPU's to float rounding.
#ifdef STRATA_USE_CUDNN

#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "strata/cuda.hpp"
#include "strata/layers/convolution_layer.hpp"

namespace strata {

namespace {

struct Algorithms {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
  size_t fwd_bytes, bwd_data_bytes, bwd_filter_bytes;
};

std::mutex g_cache_mutex;
std::map<std::string, Algorithms> g_cache;

template <typename Dtype>
cudnnDataType_t data_type();
template <>
cudnnDataType_t data_type<float>() {
  return CUDNN_DATA_FLOAT;
}
template <>
cudnnDataType_t data_type<double>() {
  return CUDNN_DATA_DOUBLE;
}

// The first (fastest: cuDNN sorts by time) usable result of a Find call. Without TF32, a result measured with
// FMA math is preferred: the descriptors asked for it, and the run uses the math type of the chosen result.
template <typename Perf>
const Perf* pick(const Perf* perf, int returned, const char* direction, const std::string& key) {
  const GpuOptions& o = gpu_options();
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > o.workspace_limit) continue;
      if (o.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      if (pass == 0 && !o.allow_tf32 && perf[i].mathType != CUDNN_FMA_MATH) continue;
      return &perf[i];
    }
  }
  STRATA_FAIL() << "cuDNN has no " << (o.deterministic ? "deterministic " : "") << direction
                << " convolution algorithm within the workspace limit of " << human_bytes(o.workspace_limit)
                << " for " << key;
  return nullptr;
}

}  // namespace

struct CudnnConvolution {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // One per direction, since each may run with its own math type.
  cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr, bwd_filter = nullptr;
  Algorithms algo{};
  std::string key;  // the shape the descriptors describe

  CudnnConvolution() {
    STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
    STRATA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&fwd));
    STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&bwd_data));
    STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&bwd_filter));
  }
  ~CudnnConvolution() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(fwd);
    cudnnDestroyConvolutionDescriptor(bwd_data);
    cudnnDestroyConvolutionDescriptor(bwd_filter);
  }
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;
};

namespace {

// Describes the layer's current shape to cuDNN and finds (or recalls) its algorithms.
template <typename Dtype>
void configure(CudnnConvolution* c, const ConvGeometry& g, int num, int num_output, int group, int out_h,
               int out_w) {
  const GpuOptions& o = gpu_options();
  std::ostringstream k;
  k << (sizeof(Dtype) == 4 ? "float" : "double") << " x " << num << "x" << g.channels << "x" << g.height << "x"
    << g.width << " w " << num_output << "x" << g.channels / group << "x" << g.kernel_h << "x" << g.kernel_w
    << " pad " << g.pad_h << "," << g.pad_w << " stride " << g.stride_h << "," << g.stride_w << " dilation "
    << g.dilation_h << "," << g.dilation_w << " group " << group << (o.allow_tf32 ? " tf32" : "")
    << (o.deterministic ? " deterministic" : "") << " limit " << o.workspace_limit;
  const std::string key = k.str();
  if (c->key == key) return;
  c->key.clear();  // set again only once the algorithms are chosen (a failed Find must not leave them stale)
  const cudnnDataType_t t = data_type<Dtype>();
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NCHW, t, num, g.channels, g.height, g.width));
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NCHW, t, num, num_output, out_h, out_w));
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(c->bias, CUDNN_TENSOR_NCHW, t, 1, num_output, 1, 1));
  STRATA_CUDNN_CHECK(cudnnSetFilter4dDescriptor(c->w, t, CUDNN_TENSOR_NCHW, num_output, g.channels / group,
                                                g.kernel_h, g.kernel_w));
  // FMA math keeps float products in float; DEFAULT lets cuDNN convert to TF32 on tensor cores.
  const cudnnMathType_t math = o.allow_tf32 && sizeof(Dtype) == 4 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t d : {c->fwd, c->bwd_data, c->bwd_filter}) {
    STRATA_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h,
                                                       g.dilation_w, CUDNN_CROSS_CORRELATION, t));
    STRATA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, group));
    STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(d, math));
  }

  Algorithms a{};
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      a = it->second;
      cached = true;
    }
  }
  if (!cached) {
    cudnnHandle_t h = cuda::cudnn();
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    STRATA_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, c->x, c->w, c->fwd, c->y,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, fp));
    const auto* f = pick(fp, returned, "forward", key);
    a.fwd = f->algo;
    a.fwd_math = f->mathType;
    a.fwd_bytes = f->memory;
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    STRATA_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        h, c->w, c->y, c->bwd_data, c->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, dp));
    const auto* d = pick(dp, returned, "backward-data", key);
    a.bwd_data = d->algo;
    a.bwd_data_math = d->mathType;
    a.bwd_data_bytes = d->memory;
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    STRATA_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
        h, c->x, c->y, c->bwd_filter, c->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, wp));
    const auto* wf = pick(wp, returned, "backward-filter", key);
    a.bwd_filter = wf->algo;
    a.bwd_filter_math = wf->mathType;
    a.bwd_filter_bytes = wf->memory;
    VLOG(1) << "cuDNN algorithms for " << key << ": forward " << a.fwd << ", backward data " << a.bwd_data
            << ", backward filter " << a.bwd_filter;
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    g_cache[key] = a;
  }
  // Run each direction with the math type its algorithm was measured with.
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(c->fwd, a.fwd_math));
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(c->bwd_data, a.bwd_data_math));
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(c->bwd_filter, a.bwd_filter_math));
  c->algo = a;
  c->key = key;
}

}  // namespace

template <typename Dtype>
void ConvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  if (!cudnn_) cudnn_ = std::make_shared<CudnnConvolution>();
  configure<Dtype>(cudnn_.get(), geom_, num_, num_output_, group_, geom_.out_h(), geom_.out_w());
  CudnnConvolution& c = *cudnn_;
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(c.algo.fwd_bytes);
  const Dtype one = 1, zero = 0;
  const Dtype* w = this->blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* y = top[i]->mutable_gpu_data();
    STRATA_CUDNN_CHECK(cudnnConvolutionForward(h, &one, c.x, bottom[i]->gpu_data(), c.w, w, c.fwd, c.algo.fwd, ws,
                                               c.algo.fwd_bytes, &zero, c.y, y));
    if (bias_term_) {
      STRATA_CUDNN_CHECK(cudnnAddTensor(h, &one, c.bias, this->blobs_[1]->gpu_data(), &one, c.y, y));
    }
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (num_ == 0) return;
  if (!cudnn_) cudnn_ = std::make_shared<CudnnConvolution>();
  configure<Dtype>(cudnn_.get(), geom_, num_, num_output_, group_, geom_.out_h(), geom_.out_w());
  CudnnConvolution& c = *cudnn_;
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(std::max(c.algo.bwd_data_bytes, c.algo.bwd_filter_bytes));
  const Dtype one = 1, zero = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const Dtype* dy = top[i]->gpu_diff();
    // Parameter gradients accumulate (beta = 1), as the CPU's GEMMs do.
    if (bias_term_ && this->param_propagate_down(1)) {
      STRATA_CUDNN_CHECK(
          cudnnConvolutionBackwardBias(h, &one, c.y, dy, &one, c.bias, this->blobs_[1]->mutable_gpu_diff()));
    }
    if (this->param_propagate_down(0)) {
      STRATA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, c.x, bottom[i]->gpu_data(), c.y, dy, c.bwd_filter,
                                                        c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &one, c.w,
                                                        this->blobs_[0]->mutable_gpu_diff()));
    }
    if (propagate_down[i]) {
      STRATA_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, c.w, this->blobs_[0]->gpu_data(), c.y, dy,
                                                      c.bwd_data, c.algo.bwd_data, ws, c.algo.bwd_data_bytes, &zero,
                                                      c.x, bottom[i]->mutable_gpu_diff()));
    }
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConvolutionLayer);

}  // namespace strata

#endif  // STRATA_USE_CUDNN
