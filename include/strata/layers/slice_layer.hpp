#pragma once

#include "strata/layer.hpp"

namespace strata {

// Cuts its bottom along one axis (slice_param.axis, default 1; the legacy slice_dim when axis is not set) into
// one top per piece: at the given slice_points (strictly increasing, one fewer than the tops), or into equal
// pieces when none are given. Concat's inverse.
template <typename Dtype>
class SliceLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Slice"; }
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

  int axis_ = 1;
  int outer_ = 0;  // product of the axes before `axis`
  int inner_ = 0;  // product of the axes after `axis`
  std::vector<int> sizes_;  // each top's extent along `axis`
};

}  // namespace strata
