#pragma once

#include "strata/layers/loss_layer.hpp"

namespace strata {

// Caffe's SigmoidCrossEntropyLoss: bottoms x (scores) and t (targets in [0, 1]) with the same count;
//   loss = sum over positions whose target is not loss_param.ignore_label of
//          -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))),
// computed in a stable form, divided by the normaliser of loss_param.normalization (N = x's first dimension is the
// batch, the rest one item). Unlike Caffe's other losses, the default with neither `normalization` nor the
// deprecated `normalize` given is BATCH_SIZE. dx = (sigmoid(x) - t) w / normaliser, 0 where the target is ignored;
// the targets get no gradient.
template <typename Dtype>
class SigmoidCrossEntropyLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
  // Writes the loss from the terms' sum over `valid` positions, and keeps the normaliser for backward.
  void SetLoss(double sum, long long valid, Blob<Dtype>* top);

  LossParameter::NormalizationMode normalization_ = LossParameter::BATCH_SIZE;
  bool has_ignore_label_ = false;
  int ignore_label_ = -1;
  int outer_ = 0, inner_ = 0;
  Dtype normaliser_ = 1;  // of the last forward
};

}  // namespace strata
