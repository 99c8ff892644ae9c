#pragma once

#include "strata/layers/loss_layer.hpp"

namespace strata {

// Caffe's EuclideanLoss: loss = sum (a - b)^2 / (2N) over two bottoms with the same first dimension N and the same
// number of values per item. Both bottoms get a gradient, with opposite signs: da = (a - b) w / N, db = -da, where w
// is the loss weight (top 0's diff).
template <typename Dtype>
class EuclideanLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "EuclideanLoss"; }
  bool BackwardNeedsTopData() const override { return false; }
  // Unlike most losses, both bottoms may take a gradient.
  bool AllowForceBackward(int bottom_index) const override { return true; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace strata
