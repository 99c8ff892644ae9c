#pragma once

#include "strata/layer.hpp"

namespace strata {

// Collapses the axes [axis, end_axis] into one (default: everything after the first axis). The top shares the
// bottom's data and diff, so forward and backward move nothing. Not in place.
template <typename Dtype>
class FlattenLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Flatten"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {}
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}
};

}  // namespace strata
