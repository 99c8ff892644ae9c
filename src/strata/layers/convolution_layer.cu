// Convolution on the GPU through cuDNN's convolution API, with the descriptors and the measured, cached choice of
// algorithms that Deconvolution shares (cudnn_convolution.cuh). In 16 bits (Layer::GpuPrecision: bfloat16 or
// float16) the input, the output and their gradients are held in that type, and channels-last where gpu_options()
// asks for it (by default in 16 bits only); then the weights multiply through their copy in that format (in KRSC order with channels-last
// activations), and the bias, its gradient and the weight gradient's accumulation are in float.
#ifdef STRATA_USE_CUDNN

#include <algorithm>
#include <type_traits>

#include "device_storage.cuh"
#include "cudnn_convolution.cuh"
#include "relu_device.cuh"
#include "strata/layers/convolution_layer.hpp"

namespace strata {

template <typename Dtype>
const cudnn_conv::Convolution& ConvolutionLayer<Dtype>::Cudnn(DeviceFormat* order) {
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  if (*order != DeviceFormat::kPlain && !weights_copy_) weights_copy_ = std::make_shared<ParamCopy>();
  cudnn_conv::configure_pass<Dtype>(cudnn_.get(), geom_, num_, num_output_, group_, order, this->layer_param().name(),
                                    "Convolution");
  return *cudnn_;
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  DeviceFormat f = format_for_images(*bottom[0], this->GpuPrecision());
  const cudnn_conv::Convolution& c = Cudnn(&f);
  if (f != DeviceFormat::kPlain) return ForwardGpuConverted(bottom, top, c, f);
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(c.algo.fwd_bytes);
  const Dtype one = 1, zero = 0;
  const Dtype* w = this->blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* y = top[i]->mutable_gpu_data();
    STRATA_CUDNN(cudnnConvolutionForward, h, &one, c.x, bottom[i]->gpu_data(), c.w, w, c.fwd, c.algo.fwd, ws,
                 c.algo.fwd_bytes, &zero, c.y, y);
    if (bias_term_) {
      STRATA_CUDNN(cudnnAddTensor, h, &one, c.y_bias, this->blobs_[1]->gpu_data(), &one, c.y, y);
    }
    if (relu_) {
      const long long n = top[i]->count();
      relu_in_place<<<cuda::blocks(n), cuda::kThreads>>>(n, Dtype(0), y);
      STRATA_CUDA_KERNEL_CHECK();
    }
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  if (num_ == 0) return;
  DeviceFormat f = format_for_images(*bottom[0], this->GpuPrecision());
  const cudnn_conv::Convolution& c = Cudnn(&f);
  if (f != DeviceFormat::kPlain) return BackwardGpuConverted(top, propagate_down, bottom, c, f);
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(std::max(c.algo.bwd_data_bytes, c.algo.bwd_filter_bytes));
  const Dtype one = 1, zero = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    const Dtype* dy = top[i]->gpu_diff();
    // Parameter gradients accumulate (beta = 1), as the CPU's GEMMs do.
    if (bias_term_ && this->param_propagate_down(1)) {
      STRATA_CUDNN(cudnnConvolutionBackwardBias, h, &one, c.y, dy, &one, c.y_bias, this->blobs_[1]->mutable_gpu_diff());
    }
    if (this->param_propagate_down(0)) {
      STRATA_CUDNN(cudnnConvolutionBackwardFilter, h, &one, c.x, bottom[i]->gpu_data(), c.y, dy, c.bwd_filter,
                   c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &one, c.w, this->blobs_[0]->mutable_gpu_diff());
    }
    if (propagate_down[i]) {
      STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, this->blobs_[0]->gpu_data(), c.y, dy, c.bwd_data,
                   c.algo.bwd_data, ws, c.algo.bwd_data_bytes, &zero, c.x, bottom[i]->mutable_gpu_diff());
    }
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::ForwardGpuConverted(const BlobVec& bottom, const BlobVec& top,
                                                  const cudnn_conv::Convolution& c, DeviceFormat f) {
  if constexpr (std::is_same<Dtype, float>::value) {
    const bool last = is_channels_last(f);
    cudnnHandle_t h = cuda::cudnn();
    void* ws = cuda::workspace(c.algo.fwd_bytes);
    const float one = 1, zero = 0;
    const float* bias = bias_term_ ? this->blobs_[1]->gpu_data() : nullptr;
    with_storage<Dtype>(element_type_of(f), [&](auto stored) {
      using T = decltype(stored);
      const T* w = weights_copy_->of<T>(*this->blobs_[0], last);
      for (size_t i = 0; i < bottom.size(); ++i) {
        const T* x = gpu_data_as<T>(*bottom[i], f);
        T* y = mutable_gpu_data_as<T>(*top[i], /*keep_values=*/false, f);
        STRATA_CUDNN(cudnnConvolutionForward, h, &one, c.x, x, c.w, w, c.fwd, c.algo.fwd, ws, c.algo.fwd_bytes,
                     &zero, c.y, y);
        if (bias || relu_) gpu_bias_relu(top[i]->count(), out_count_, num_output_, bias, relu_ != nullptr, y, last);
      }
    });
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::BackwardGpuConverted(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                   const BlobVec& bottom, const cudnn_conv::Convolution& c,
                                                   DeviceFormat f) {
  if constexpr (std::is_same<Dtype, float>::value) {
    const bool last = is_channels_last(f);
    cudnnHandle_t h = cuda::cudnn();
    const float one = 1, zero = 0;
    const Blob<Dtype>& weight = *this->blobs_[0];
    const int weights = weight.count();
    with_storage<Dtype>(element_type_of(f), [&](auto stored) {
      using T = decltype(stored);
      const T* w = weights_copy_->of<T>(weight, last);
      for (size_t i = 0; i < top.size(); ++i) {
        const T* dy = gpu_diff_as<T>(*top[i], f);
        // Parameter gradients accumulate, in float, as the plain path's do.
        if (bias_term_ && this->param_propagate_down(1)) {
          // Channels-last, the output is (num x out_count) rows of num_output channels.
          gpu_channel_sums_as(last ? num_ * out_count_ : num_, num_output_, last ? 1 : out_count_, dy,
                              this->blobs_[1]->mutable_gpu_diff());
        }
        // After the bias's reduction, which takes the workspace for its partial sums.
        void* ws = cuda::workspace(std::max(c.algo.bwd_data_bytes, c.algo.bwd_filter_bytes));
        if (this->param_propagate_down(0)) {
          weight_diff_copy_.set_memory_category(MemoryCategory::kWorkspace);
          weight_diff_copy_.Reshape({weights});
          T* dw = mutable_gpu_data_as<T>(weight_diff_copy_, /*keep_values=*/false);
          STRATA_CUDNN(cudnnConvolutionBackwardFilter, h, &one, c.x, gpu_data_as<T>(*bottom[i], f), c.y, dy,
                       c.bwd_filter, c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &zero, c.w, dw);
          // In the filter order of channels-last activations (KRSC) when they are.
          gpu_add_as<T>(weights, dw, this->blobs_[0]->mutable_gpu_diff(),
                        ImageLayout{weight.shape(1), weight.count(2), last});
        }
        if (propagate_down[i]) {
          STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, w, c.y, dy, c.bwd_data, c.algo.bwd_data, ws,
                       c.algo.bwd_data_bytes, &zero, c.x,
                       mutable_gpu_diff_as<T>(*bottom[i], /*keep_values=*/false, f));
        }
      }
    });
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConvolutionLayer);

}  // namespace strata

#endif  // STRATA_USE_CUDNN
