#pragma once

#include "strata/layers/bias_layer.hpp"

namespace strata {

// Multiplies by a scale broadcast over a blob, optionally adding a bias: top = bottom[0] * s (+ b). s covers
// the axes [axis, axis + num_axes) of bottom[0] (num_axes -1: to the end) and is a learned blob (filler
// default constant 1), or the second bottom, which then gets a gradient (its own shape gives num_axes). The
// bias, with bias_term, is a learned blob of s's shape. Parameter blobs: [scale] or [scale, bias] with one
// bottom, [] or [bias] with two. Works in place: the input is then copied for the scale's gradient.
template <typename Dtype>
class ScaleLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Scale"; }
  bool BackwardNeedsTopData() const override { return false; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&input_copy_}; }
  bool BackwardWorksInPlace() const override { return true; }  // forward copies the input (input_copy_)
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  // A learned scale per channel of a 4-D bottom runs in the channel-blocked layout too.
  bool AcceptsBlockedBottoms() const override { return per_channel_; }
  // One bottom of 4 axes, with a learned scale (and bias, with bias_term) per channel (axis 1).
  bool scales_channels() const { return per_channel_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  const Blob<Dtype>& scale(const BlobVec& bottom) const { return bottom.size() > 1 ? *bottom[1] : *this->blobs_[0]; }

  BroadcastGeometry geom_;
  int bias_param_id_ = -1;   // index of the bias in blobs(), -1 without bias_term
  Blob<Dtype> input_copy_;   // bottom[0]'s values when running in place (for the scale's gradient)
  bool input_copied_ = false;
  bool per_channel_ = false;           // one bottom of 4 axes, scaled along axis 1 alone
  MemoryFormat layout_ = MemoryFormat::kPlain;     // the layout the last forward ran in (and input_copy_ is in)
};

}  // namespace strata
