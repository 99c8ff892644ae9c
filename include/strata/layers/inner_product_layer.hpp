#pragma once

#include "strata/layer.hpp"

namespace strata {

// Fully connected: top = bottom * W^T + b over the axes from `axis` on (W is num_output x K, or K x
// num_output with transpose: true). One GEMM forward, two backward.
template <typename Dtype>
class InnerProductLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "InnerProduct"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  int M_ = 0;  // rows: the product of the axes before `axis`
  int K_ = 0;  // inputs per row
  int N_ = 0;  // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob<Dtype> bias_multiplier_;  // a column of ones, for adding the bias with a GEMM
};

}  // namespace strata
