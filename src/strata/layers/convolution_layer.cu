// Convolution on the GPU through cuDNN's convolution API, with the descriptors and the measured, cached choice of
// algorithms that Deconvolution shares (cudnn_convolution.cuh).
#ifdef STRATA_USE_CUDNN

#include <algorithm>

#include "cudnn_convolution.cuh"
#include "relu_device.cuh"
#include "strata/layers/convolution_layer.hpp"

namespace strata {

template <typename Dtype>
void ConvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  cudnn_conv::configure<Dtype>(cudnn_.get(), geom_, num_, num_output_, group_);
  const cudnn_conv::Convolution& c = *cudnn_;
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
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  cudnn_conv::configure<Dtype>(cudnn_.get(), geom_, num_, num_output_, group_);
  const cudnn_conv::Convolution& c = *cudnn_;
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

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConvolutionLayer);

}  // namespace strata

#endif  // STRATA_USE_CUDNN
