#pragma once

#include "strata/layer.hpp"

namespace strata {

// Hands one blob to several consumers: every top shares the bottom's data, and backward sums the tops'
// gradients into the bottom. Net inserts these automatically.
template <typename Dtype>
class SplitLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Split"; }
  bool IsSplit() const override { return true; }
  // The tops share the bottom's memory in whatever layout it is; the gradients are summed in that layout.
  bool AcceptsBlockedBottoms() const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace strata
