#pragma once

#include "strata/layers/loss_layer.hpp"

namespace strata {

// Caffe's ContrastiveLoss over pairs: bottoms a and b (N x C features, or N x C x 1 x 1) and y (N similarity
// labels: a pair is similar when y, truncated to int, is not 0). With d the Euclidean distance of a pair,
//   loss = sum over pairs of (similar ? d^2 : max(margin - d, 0)^2) / (2N),
// or max(margin - d^2, 0) for a dissimilar pair with contrastive_loss_param.legacy_version (margin defaults to 1).
// a and b get opposite gradients (Caffe's, whose dissimilar case divides by d + 1e-4); y gets none.
template <typename Dtype>
class ContrastiveLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "ContrastiveLoss"; }
  bool BackwardNeedsTopData() const override { return false; }
  int ExactNumBottomBlobs() const override { return 3; }
  // a and b may take a gradient, the similarity labels never.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Blob<Dtype> dist_sq_;  // each pair's squared distance, from forward for backward
  int num_ = 0, channels_ = 0;
};

}  // namespace strata
