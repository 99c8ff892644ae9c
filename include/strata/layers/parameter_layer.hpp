#pragma once

#include "strata/layer.hpp"

namespace strata {

// One learnable blob of parameter_param.shape (a scalar when no shape is given), exposed as the layer's only
// top; no bottoms (Caffe's Parameter). The blob starts at zero (Caffe gives it no filler) unless it comes with
// the layer (a caffemodel), and learns through whatever reads the top.
//
// Caffe's top shares the blob's value and gradient memory. Here the top is a copy and backward adds the top's
// gradient into the blob's, which computes the same: the shared memory would let the net's memory planner,
// which frees activations after use, free the parameter along with its top.
template <typename Dtype>
class ParameterLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*this->blobs_[0]); }
  const char* type() const override { return "Parameter"; }
  int ExactNumBottomBlobs() const override { return 0; }
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
};

}  // namespace strata
