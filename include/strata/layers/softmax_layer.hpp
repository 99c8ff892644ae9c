#pragma once

#include "strata/layer.hpp"

namespace strata {

// Softmax over one axis (softmax_param.axis, default 1): the blob is seen as (outer, channels, inner) and
// each of the outer * inner fibres of `channels` values is normalised, y = e^(x - max) / sum e^(x - max).
// Backward, dx = (dy - sum(dy * y)) * y, reads only the top. Works in place.
template <typename Dtype>
class SoftmaxLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return true; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  int outer_ = 0;     // product of the axes before the softmax axis
  int channels_ = 0;  // the softmax axis
  int inner_ = 0;     // product of the axes after it (the stride between two channels)
};

}  // namespace strata
