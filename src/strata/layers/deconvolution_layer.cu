// Deconvolution on the GPU through cuDNN: the convolution it transposes is described with x = the top (num_output
// channels) and y = the bottom, so forward is cuDNN's backward-data, backward-data is cuDNN's forward and the
// weight gradient is cuDNN's backward-filter, with the algorithms chosen as for Convolution. In bfloat16
// (Layer::Bf16OnGpu) as Convolution: activations and their gradients in bfloat16, the weights through their
// bfloat16 copy, the bias and the parameter gradients' accumulation in float.
#ifdef STRATA_USE_CUDNN

#include <algorithm>
#include <type_traits>

#include "bf16_device.cuh"
#include "cudnn_convolution.cuh"
#include "strata/layers/deconvolution_layer.hpp"

namespace strata {

template <typename Dtype>
const cudnn_conv::Convolution& DeconvolutionLayer<Dtype>::Cudnn(bool bf16, DeviceFormat* order) {
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  if (bf16 && !bf16_weights_) bf16_weights_ = std::make_shared<Bf16Copy>();
  DeviceFormat plain = DeviceFormat::kPlain;
  cudnn_conv::configure_pass<Dtype>(cudnn_.get(), geom_, num_, channels_, group_, bf16, order ? order : &plain,
                                    this->layer_param().name(), "Deconvolution");
  return *cudnn_;
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  const bool bf16 = this->Bf16OnGpu();
  DeviceFormat f = bf16 ? bf16_format_for_images(*bottom[0]) : DeviceFormat::kPlain;
  const cudnn_conv::Convolution& c = Cudnn(bf16, &f);
  const bool last = f == DeviceFormat::kBf16Nhwc;
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(c.algo.bwd_data_bytes);
  const Dtype one = 1, zero = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    if constexpr (std::is_same<Dtype, float>::value) {
      if (bf16) {
        const bfloat16* x = bottom[i]->gpu_data_bf16(f);
        bfloat16* y = top[i]->mutable_gpu_data_bf16(/*keep_values=*/false, f);
        STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, bf16_weights_->of(*this->blobs_[0], last), c.y, x,
                     c.bwd_data, c.algo.bwd_data, ws, c.algo.bwd_data_bytes, &zero, c.x, y);
        if (bias_term_) {
          gpu_bias_relu_bf16(top[i]->count(), geom_.height * geom_.width, num_output_, this->blobs_[1]->gpu_data(),
                             false, y, last);
        }
        continue;
      }
    }
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
  const bool bf16 = this->Bf16OnGpu();
  DeviceFormat f = bf16 ? bf16_format_for_images(*bottom[0]) : DeviceFormat::kPlain;
  const cudnn_conv::Convolution& c = Cudnn(bf16, &f);
  const bool last = f == DeviceFormat::kBf16Nhwc;
  cudnnHandle_t h = cuda::cudnn();
  const Dtype one = 1, zero = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    if constexpr (std::is_same<Dtype, float>::value) {
      if (bf16) {
        const bfloat16* dy = top[i]->gpu_diff_bf16(f);
        // Parameter gradients accumulate, in float; the bias's first (its sums take the workspace).
        if (bias_term_ && this->param_propagate_down(1)) {
          const int spatial = geom_.height * geom_.width;
          gpu_channel_sums_bf16(last ? num_ * spatial : num_, num_output_, last ? 1 : spatial, dy,
                                this->blobs_[1]->mutable_gpu_diff());
        }
        void* ws = cuda::workspace(std::max(c.algo.fwd_bytes, c.algo.bwd_filter_bytes));
        if (this->param_propagate_down(0)) {
          const int weights = this->blobs_[0]->count();
          weight_diff_bf16_.set_memory_category(MemoryCategory::kWorkspace);
          weight_diff_bf16_.Reshape({weights});
          bfloat16* dw = weight_diff_bf16_.mutable_gpu_data_bf16(/*keep_values=*/false);
          STRATA_CUDNN(cudnnConvolutionBackwardFilter, h, &one, c.x, dy, c.y, bottom[i]->gpu_data_bf16(f),
                       c.bwd_filter, c.algo.bwd_filter, ws, c.algo.bwd_filter_bytes, &zero, c.w, dw);
          const Blob<Dtype>& weight = *this->blobs_[0];
          gpu_add_bf16(weights, dw, this->blobs_[0]->mutable_gpu_diff(),
                       ImageLayout{weight.shape(1), weight.count(2), last});
        }
        if (propagate_down[i]) {
          STRATA_CUDNN(cudnnConvolutionForward, h, &one, c.x, dy, c.w, bf16_weights_->of(*this->blobs_[0], last),
                       c.fwd, c.algo.fwd, ws, c.algo.fwd_bytes, &zero, c.y, bottom[i]->mutable_gpu_diff_bf16(false, f));
        }
        continue;
      }
    }
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
