// Deconvolution on the GPU through cuDNN: the convolution it transposes is described with x = the top (num_output
// channels) and y = the bottom, so forward is cuDNN's backward-data, backward-data is cuDNN's forward and the
// weight gradient is cuDNN's backward-filter, with the algorithms chosen as for Convolution.
#ifdef STRATA_USE_CUDNN

#include <algorithm>

#include "cudnn_convolution.cuh"
#include "strata/layers/deconvolution_layer.hpp"

namespace strata {

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  cudnn_conv::configure<Dtype>(cudnn_.get(), geom_, num_, channels_, group_);
  const cudnn_conv::Convolution& c = *cudnn_;
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(c.algo.bwd_data_bytes);
  const Dtype one = 1, zero = 0;
  const Dtype* w = this->blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* y = top[i]->mutable_gpu_data();
    STRATA_CUDNN(cudnnConvolutionBackwardData, h, &one, c.w, w, c.y, bottom[i]->gpu_data(), c.bwd_data, c.algo.bwd_data,
                 ws, c.algo.bwd_data_bytes, &zero, c.x, y);
    if (bias_term_) {
      STRATA_CUDNN(cudnnAddTensor, h, &one, c.x_bias, this->blobs_[1]->gpu_data(), &one, c.x, y);
    }
  }
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (num_ == 0) return;
  if (!cudnn_) cudnn_ = std::make_shared<cudnn_conv::Convolution>();
  cudnn_conv::configure<Dtype>(cudnn_.get(), geom_, num_, channels_, group_);
  const cudnn_conv::Convolution& c = *cudnn_;
  cudnnHandle_t h = cuda::cudnn();
  void* ws = cuda::workspace(std::max(c.algo.fwd_bytes, c.algo.bwd_filter_bytes));
  const Dtype one = 1, zero = 0;
  for (size_t i = 0; i < top.size(); ++i) {
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
