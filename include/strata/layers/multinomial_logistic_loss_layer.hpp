#pragma once

#include "strata/layers/loss_layer.hpp"

namespace strata {

// Caffe's MultinomialLogisticLoss: bottoms p (N items of K probabilities each, whatever the axes after the first:
// the output of a Softmax, say) and the labels (N class indices in [0, K), shape N or N x 1 x 1 x 1);
//   loss = -sum over items of log(max(p_label, 1e-20)) / N.
// The clamp (Caffe's kLOG_THRESHOLD) keeps a zero probability finite. No ignore_label and no normalisation choice,
// as in Caffe. dp is -w / (N max(p_label, 1e-20)) at each item's label and 0 elsewhere; the labels get none.
template <typename Dtype>
class MultinomialLogisticLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "MultinomialLogisticLoss"; }
  bool BackwardNeedsTopData() const override { return false; }
  int LabelBottom() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
  // Writes the loss from the summed terms, or reports the first bad label.
  void SetLoss(double sum, long long first_bad, const BlobVec& bottom, const BlobVec& top);

  int num_ = 0, dim_ = 0;
};

}  // namespace strata
