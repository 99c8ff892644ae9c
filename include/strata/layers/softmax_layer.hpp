#pragma once

#include <memory>

#include "strata/layer.hpp"

namespace strata {

namespace onednn_softmax {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_softmax.hpp).
class Softmax;
}  // namespace onednn_softmax

// Softmax over one axis (softmax_param.axis, default 1): the blob is seen as (outer, channels, inner) and
// each of the outer * inner fibres of `channels` values is normalised, y = e^(x - max) / sum e^(x - max).
// Backward, dx = (dy - sum(dy * y)) * y, reads only the top. Works in place.
//
// On the CPU, softmax_param.engine picks who computes (SoftmaxWithLoss's inner softmax too): CAFFE the loops of
// softmax_layer.cpp (the reference), ONEDNN oneDNN's softmax (float only), DEFAULT oneDNN in float where measured
// faster (docs/onednn.md), the loops otherwise and in double.
template <typename Dtype>
class SoftmaxLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Softmax"; }
  // Whether the CPU passes run through oneDNN (softmax_param.engine, above).
  bool uses_onednn() const { return onednn_ != nullptr; }
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
  // Set when the engine picks oneDNN (float only).
  std::shared_ptr<onednn_softmax::Softmax> onednn_;
};

}  // namespace strata
