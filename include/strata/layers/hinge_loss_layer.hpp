#pragma once

#include "strata/layers/loss_layer.hpp"

namespace strata {

// Caffe's HingeLoss (one-vs-all): bottoms x (N items of K scores each, whatever the axes after the first) and the
// labels (N class indices in [0, K)). With t = -1 for the labelled class and 1 for the others, the margins are
// m = max(0, 1 + t x) and
//   loss = sum m / N (hinge_loss_param.norm L1, the default) or sum m^2 / N (L2).
// No ignore_label and no normalisation choice, as in Caffe. The labels get no gradient.
template <typename Dtype>
class HingeLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "HingeLoss"; }
  bool BackwardNeedsTopData() const override { return false; }
  int LabelBottom() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
  // Writes the loss from the summed terms, or reports the item of the first bad label (a position of the scores).
  void SetLoss(double sum, long long first_bad, const BlobVec& bottom, const BlobVec& top);

  bool l2_ = false;
  int num_ = 0, dim_ = 0;
};

}  // namespace strata
