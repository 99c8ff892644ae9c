// Deconvolution on the GPU through cuDNN: the convolution it transposes is described with x = the top (num_output
// channels) and y = the bottom, so forward is cuDNN's backward-data, backward-data is cuDNN's forward and the
// weight gradient is cuDNN's backward-filter, with the algorithms chosen as for Convolution. In 16 bits
// (Layer::GpuPrecision) and channels-last as Convolution: activations and their gradients in that format, the weights
// through their copy in it, the bias and the parameter gradients' accumulation in float.
#ifdef STRATA_USE_CUDNN

#include <algorithm>
#include <type_traits>

#include "device_storage.cuh"
#include "cudnn_convolution.cuh"
#include "strata/layers/deconvolution_layer.hpp"

namespace strata {

template <typename Dtype>
const cudnn_conv::Convolution& DeconvolutionLayer<Dtype>::Cudnn(DeviceFormat* order) {
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  if (*order != DeviceFormat::kPlain && !weights_copy_) weights_copy_ = std::make_shared<ParamCopy>();
  cudnn_conv::configure_pass<Dtype>(cudnn_.get(), geom_, num_, channels_, group_, order, this->layer_param().name(),
                                    "Deconvolution");
  return *cudnn_;
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  DeviceFormat f = format_for_images(*bottom[0], this->GpuPrecision());
  const cudnn_conv::Convolution& c = Cudnn(&f);
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(c.algo.bwd_data_bytes);
  const Dtype one = 1, zero = 0;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (f != DeviceFormat::kPlain) {
      const bool last = is_channels_last(f);
      return with_storage<Dtype>(element_type_of(f), [&](auto stored) {
        using T = decltype(stored);
        const T* w = weights_copy_->of<T>(*this->blobs_[0], last);
        for (size_t i = 0; i < bottom.size(); ++i) {
          const T* x = gpu_data_as<T>(*bottom[i], f);
          T* y = mutable_gpu_data_as<T>(*top[i], /*keep_values=*/false, f);
          STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, w, c.y, x, c.bwd_data, c.algo.bwd_data, ws,
                       c.algo.bwd_data_bytes, &zero, c.x, y);
          if (bias_term_) {
            gpu_bias_relu(top[i]->count(), geom_.height * geom_.width, num_output_, this->blobs_[1]->gpu_data(),
                          false, y, last);
          }
        }
      });
    }
  }
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* y = top[i]->mutable_gpu_data();
    STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, this->blobs_[0]->gpu_data(), c.y, bottom[i]->gpu_data(),
                 c.bwd_data, c.algo.bwd_data, ws, c.algo.bwd_data_bytes, &zero, c.x, y);
    if (bias_term_) {
      STRATA_CUDNN(cudnnAddTensor, h, &one, c.x_bias, this->blobs_[1]->gpu_data(), &one, c.x, y);
    }
  }
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (num_ == 0) return;
  DeviceFormat f = format_for_images(*bottom[0], this->GpuPrecision());
  const cudnn_conv::Convolution& c = Cudnn(&f);
  cudnnHandle_t h = cuda::cudnn();
  const Dtype one = 1, zero = 0;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (f != DeviceFormat::kPlain) {
      const bool last = is_channels_last(f);
      return with_storage<Dtype>(element_type_of(f), [&](auto stored) {
        using T = decltype(stored);
        const Blob<Dtype>& weight = *this->blobs_[0];
        for (size_t i = 0; i < top.size(); ++i) {
          const T* dy = gpu_diff_as<T>(*top[i], f);
          // Parameter gradients accumulate, in float; the bias's first (its sums take the workspace).
          if (bias_term_ && this->param_propagate_down(1)) {
            const int spatial = geom_.height * geom_.width;
            gpu_channel_sums_as(last ? num_ * spatial : num_, num_output_, last ? 1 : spatial, dy,
                                this->blobs_[1]->mutable_gpu_diff());
          }
          void* ws = cuda::workspace(std::max(c.algo.fwd_bytes, c.algo.bwd_filter_bytes));
          if (this->param_propagate_down(0)) {
            const int weights = weight.count();
            weight_diff_copy_.set_memory_category(MemoryCategory::kWorkspace);
            weight_diff_copy_.Reshape({weights});
            T* dw = mutable_gpu_data_as<T>(weight_diff_copy_, /*keep_values=*/false);
            STRATA_CUDNN(cudnnConvolutionBackwardFilter, h, &one, c.x, dy, c.y, gpu_data_as<T>(*bottom[i], f),
                         c.bwd_filter, c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &zero, c.w, dw);
            gpu_add_as<T>(weights, dw, this->blobs_[0]->mutable_gpu_diff(),
                          ImageLayout{weight.shape(1), weight.count(2), last});
          }
          if (propagate_down[i]) {
            STRATA_CUDNN(cudnnConvolutionForward, h, &one, c.x, dy, c.w, weights_copy_->of<T>(weight, last), c.fwd,
                         c.algo.fwd, ws, c.algo.fwd_bytes, &zero, c.y,
                         mutable_gpu_diff_as<T>(*bottom[i], /*keep_values=*/false, f));
          }
        }
      });
    }
  }
  for (size_t i = 0; i < top.size(); ++i) {
    void* ws = cuda::workspace(std::max(c.algo.fwd_bytes, c.algo.bwd_filter_bytes));
    const Dtype* dy = top[i]->gpu_diff();
    // Parameter gradients accumulate (beta = 1), as the CPU's do.
    if (bias_term_ && this->param_propagate_down(1)) {
      STRATA_CUDNN(cudnnConvolutionBackwardBias, h, &one, c.x, dy, &one, c.x_bias, this->blobs_[1]->mutable_gpu_diff());
    }
    if (this->param_propagate_down(0)) {
      // The transposed convolution's input is the top (its gradient here), its output the bottom.
      STRATA_CUDNN(cudnnConvolutionBackwardFilter, h, &one, c.x, dy, c.y, bottom[i]->gpu_data(), c.bwd_filter,
                   c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &one, c.w, this->blobs_[0]->mutable_gpu_diff());
    }
    if (propagate_down[i]) {
      STRATA_CUDNN(cudnnConvolutionForward, h, &one, c.x, dy, c.w, this->blobs_[0]->gpu_data(), c.fwd, c.algo.fwd, ws,
                   c.algo.fwd_bytes, &zero, c.y, bottom[i]->mutable_gpu_diff());
    }
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(DeconvolutionLayer);

}  // namespace strata

#endif  // STRATA_USE_CUDNN
