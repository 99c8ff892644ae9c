#pragma once

#include "strata/layer.hpp"

namespace strata {

// Top-k classification accuracy (never a loss, no backward). Bottoms: scores (outer, C, inner) with C along
// accuracy_param.axis, and labels (outer * inner values). A labelled position counts as correct when fewer
// than top_k other classes score at least as high as the label's class (Caffe's rule: ties count against
// the label). Positions whose label is accuracy_param.ignore_label are skipped. Tops: the accuracy (a scalar)
// and optionally the per-class accuracy, shape (C) (0 for classes that never occur).
template <typename Dtype>
class AccuracyLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit AccuracyLayer(const LayerParameter& param);
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  int LabelBottom() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = -1;
  int outer_ = 0, channels_ = 0, inner_ = 0;
  Blob<Dtype> class_counts_;  // per-class number of labelled positions (second top only)
};

}  // namespace strata
