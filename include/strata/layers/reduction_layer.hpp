#pragma once

#include "strata/layer.hpp"

namespace strata {

// Reduces all the axes from reduction_param.axis (default 0) on to one value, Caffe's Reduction: the top keeps
// the axes before `axis` (a scalar for axis 0), and each of its values is coeff times
//   SUM: the sum, ASUM: the sum of |x|, SUMSQ: the sum of x^2, MEAN: the mean
// of the bottom's values at that position. Only tail reductions exist (Caffe has no end axis).
// Backward: dx = coeff * dy times 1 (SUM), 1/n (MEAN), sign(x) (ASUM, 0 at 0), 2x (SUMSQ).
template <typename Dtype>
class ReductionLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Reduction"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override {
    const auto op = this->layer_param_.reduction_param().operation();
    return op == ReductionParameter::ASUM || op == ReductionParameter::SUMSQ;
  }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  ReductionParameter::ReductionOp op_ = ReductionParameter::SUM;
  Dtype coeff_ = 1;  // reduction_param.coeff, divided by dim_ for MEAN
  int num_ = 0;      // values in the top: product of the axes before `axis`
  int dim_ = 0;      // values reduced into each: product of the axes from `axis` on
};

}  // namespace strata
