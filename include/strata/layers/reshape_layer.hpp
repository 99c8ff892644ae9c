#pragma once

#include "strata/layer.hpp"

namespace strata {

// Gives the bottom a new shape, Caffe's Reshape: reshape_param.shape replaces the bottom's axes
// [axis, axis + num_axes) (default: all of them; a negative axis counts from the end, -1 meaning after the
// last axis); in it 0 copies the bottom's dimension at the same place and one -1 is inferred from the count.
// The top shares the bottom's data and diff, so forward and backward move nothing. Not in place.
template <typename Dtype>
class ReshapeLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Reshape"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {}
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}

  std::vector<int> copy_axes_;   // positions in reshape_param.shape holding 0
  int inferred_axis_ = -1;       // position of the -1, if any
  long long constant_count_ = 1; // product of the explicit (positive) dimensions
};

}  // namespace strata
