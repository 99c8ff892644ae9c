#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

// Caffe's "Crop": crops bottom 0 to the shape of bottom 1 on every axis from crop_param.axis (default 2, so
// N x C are kept) on, starting at crop_param.offset: none (0 on every cropped axis), one for all of them, or one
// per cropped axis. Axes before `axis` keep bottom 0's size. The crop must fit: offset + the reference's size
// <= bottom 0's size on every cropped axis. Backward copies the top gradient into the cropped window of bottom
// 0's gradient (zero elsewhere); bottom 1 gives only a shape, so its gradient, when asked for, is zero.
template <typename Dtype>
class CropLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Crop"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  // The reference bottom's values never reach the top.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

  // Where the crop starts on every axis of bottom 0 (0 before `axis`), as of the last Reshape.
  const std::vector<int>& offsets() const { return offsets_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  int start_axis_ = 2;
  std::vector<int> offsets_;
};

}  // namespace strata
