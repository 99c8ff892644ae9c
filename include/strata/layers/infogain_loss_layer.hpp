#pragma once

#include <memory>

#include "strata/layers/loss_layer.hpp"
#include "strata/layers/softmax_layer.hpp"

namespace strata {

// Caffe's InfogainLoss, a SoftmaxWithLoss weighted by an "information gain" matrix H (K x K; H = I gives
// SoftmaxWithLoss). Bottoms: scores (outer, K, inner) with K along infogain_loss_param.axis (default 1), labels
// (outer * inner values in [0, K), or loss_param.ignore_label), and optionally H as a third bottom; without it H
// is read from infogain_loss_param.source, a binary BlobProto of K * K values. With p the softmax of the scores
// over the axis,
//   loss = -sum over labelled positions of sum_k H[label, k] log(max(p_k, 1e-20)) / normaliser,
// the normaliser from loss_param.normalization (default VALID; the deprecated `normalize` is refused, as in
// Caffe). dx_k = (p_k sum_j H[label, j] - H[label, k]) w / normaliser. The optional second top holds p (it weighs
// 0 unless loss_weight says otherwise). Neither the labels nor H get a gradient.
template <typename Dtype>
class InfogainLossLayer : public LossLayer<Dtype> {
 public:
  using typename LossLayer<Dtype>::BlobVec;
  using LossLayer<Dtype>::LossLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "InfogainLoss"; }
  int ExactNumBottomBlobs() const override { return -1; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // Only the scores take a gradient (Caffe would let force_backward reach a bottom H, then abort in backward).
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
  int LabelBottom() const override { return 1; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&prob_}; }
  // Backward reads the labels and H (bottoms) and the probabilities, which are the second top when there is one.
  bool BackwardNeedsTopData() const override { return this->layer_param_.top_size() > 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
  // H: the third bottom when there is one, else the matrix read from the source file.
  const Blob<Dtype>& Infogain(const BlobVec& bottom) const { return bottom.size() > 2 ? *bottom[2] : infogain_; }
  // Writes the loss from the terms' sum over `valid` positions and keeps the normaliser for backward, or reports
  // the first bad label.
  void SetLoss(double sum, long long valid, long long first_bad, const BlobVec& bottom, const BlobVec& top);
  void RefuseGradients(const std::vector<bool>& propagate_down) const;

  std::unique_ptr<SoftmaxLayer<Dtype>> softmax_;
  Blob<Dtype> prob_;              // the probabilities when there is no second top
  Blob<Dtype>* probs_ = nullptr;  // prob_, or top[1] when there is one
  Blob<Dtype> infogain_;          // H from infogain_loss_param.source
  Blob<Dtype> row_sums_;          // sum_j H[i, j] for every row i, for backward
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = -1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  Dtype normaliser_ = 1;  // of the last forward
};

}  // namespace strata
