// What Caffe's loss layers share (EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, HingeLoss, InfogainLoss,
// MultinomialLogisticLoss derive from LossLayer; SoftmaxWithLoss predates it and keeps its own copy of these rules).
#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

// Caffe's LossLayer: two bottoms (the predictions, then the labels or targets) with the same first dimension, and
// one scalar top (0 axes) that weighs 1 unless the prototxt gives loss_weight (further tops, where a layer has
// them, weigh 0). The label bottom (1) gets no gradient, even under force_backward.
template <typename Dtype>
class LossLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  // Records the default loss weights in the layer's parameters, so that SetLossWeights and the Net see them.
  // A derived LayerSetUp calls this first.
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Checks the first dimensions and makes top 0 a scalar. A derived Reshape calls this first.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  // Throws when backward is asked for a gradient into bottom `b`, which holds `what` ("labels", ...). Caffe's
  // loss layers refuse these the same way (LOG(FATAL)).
  void RefuseGradient(const std::vector<bool>& propagate_down, int b, const char* what) const;
};

// The normalisation a loss_param asks for: `normalization` when it is given, else the deprecated `normalize`
// when that is given (true: VALID, false: BATCH_SIZE), else `when_unset` (VALID, the proto's default, for most
// layers; Caffe's SigmoidCrossEntropyLoss uses BATCH_SIZE).
LossParameter::NormalizationMode LossNormalization(const LossParameter& param,
                                                   LossParameter::NormalizationMode when_unset);

// What a loss summed over outer x inner positions, `valid` of which were counted (not ignored), is divided by:
// FULL outer * inner, VALID valid, BATCH_SIZE outer, NONE 1. Never below 1, so a batch whose labels are all
// ignored gives loss 0, not NaN.
double LossNormaliser(LossParameter::NormalizationMode mode, long long outer, long long inner, long long valid);

}  // namespace strata
