#pragma once

#include <memory>

#include "strata/layer.hpp"
#include "strata/layers/softmax_layer.hpp"

namespace strata {

// Multinomial logistic loss of a softmax, computed together for numerical stability of the gradient.
// Bottoms: scores (outer, C, inner) with C along softmax_param.axis, and labels (outer * inner values in
// {0..C-1}, or loss_param.ignore_label). Tops: the loss, and optionally the probabilities.
//   loss = -sum over labelled positions of log(max(p_label, FLT_MIN)) / normaliser,
// the normaliser given by loss_param.normalization (VALID: labelled positions, FULL: all positions,
// BATCH_SIZE: outer, NONE: 1; never below 1). The loss weight defaults to 1 on the first top.
template <typename Dtype>
class SoftmaxWithLossLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "SoftmaxWithLoss"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&prob_}; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  // Labels get no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != LabelBottom(); }
  int LabelBottom() const override { return 1; }
  // Backward reads the labels (a bottom) and the probabilities, which are the second top when there is one.
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return this->layer_param_.top_size() > 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  // What the summed loss is divided by, for `valid` labelled positions.
  Dtype Normaliser(long long valid) const;

  std::unique_ptr<SoftmaxLayer<Dtype>> softmax_;
  Blob<Dtype> prob_;              // the probabilities when there is no second top
  Blob<Dtype>* probs_ = nullptr;  // prob_, or top[1] when there is one
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = -1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
};

}  // namespace strata
