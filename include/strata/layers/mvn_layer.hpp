#pragma once

#include "strata/layer.hpp"

namespace strata {

// Mean-variance normalisation, Caffe's MVN (mvn_param). Each row, that is each (item, channel) of an
// (N, C, H, W) bottom, or each item when across_channels, becomes
//   y = (x - mean) / (sqrt(var) + eps)   (normalize_variance, the default; var the biased variance)
//   y = x - mean                         (normalize_variance: false)
// eps (default 1e-9) is added to the standard deviation, not to the variance, as in Caffe.
// Backward, as Caffe computes it: dx = (dy - mean(dy) - y * mean(dy * y)) / (sqrt(var) + eps), or
// dx = dy - mean(dy). (The first is the exact gradient for eps = 0; with eps it leaves out a relative eps / std
// in the last term, 1e-9 of it for unit data at the default eps.)
// The bottom may have at most 4 axes and the top is always 4-D (N, C, H, W), Caffe's legacy shapes: a bottom
// (N, C) gives a top (N, C, 1, 1). Works in place; backward reads the top, not the bottom.
template <typename Dtype>
class MVNLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "MVN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return normalize_variance(); }
  std::vector<Blob<Dtype>*> SavedActivations() override {
    if (normalize_variance()) return {&std_};
    return {};
  }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  bool normalize_variance() const { return this->layer_param_.mvn_param().normalize_variance(); }

  int rows_ = 0;  // rows normalised: N * C, or N across channels
  int dim_ = 0;   // values per row (contiguous)
  Dtype eps_ = 0;
  Blob<Dtype> mean_;  // per row: the mean (GPU forward scratch)
  Blob<Dtype> std_;   // per row: sqrt(variance) + eps, kept for backward
  Blob<Dtype> grad_;  // 2 x rows: mean(dy), then mean(dy * y) (GPU backward scratch)
};

}  // namespace strata
