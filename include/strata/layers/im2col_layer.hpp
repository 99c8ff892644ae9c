#pragma once

#include "strata/im2col.hpp"
#include "strata/layer.hpp"

namespace strata {

// Caffe's "Im2col": unfolds every image into its convolution column matrix, with a convolution_param window
// (kernel, stride, pad, dilation; axis for the channel axis). A bottom of N x C x H x W gives a top of
// N x (C * kernel_h * kernel_w) x out_h x out_w, where channel (c * kernel_h + i) * kernel_w + j at (oh, ow) holds
// the input pixel that kernel offset (i, j) of the window at (oh, ow) reads (0 in the padding). Backward folds
// the top gradient back onto the pixels (col2im). 2-D windows only, as in Convolution.
template <typename Dtype>
class Im2colLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Im2col"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  ConvGeometry geom_;  // of one image
  int channel_axis_ = 1;
  int num_ = 0;  // images: the product of the axes before the channel axis
};

}  // namespace strata
