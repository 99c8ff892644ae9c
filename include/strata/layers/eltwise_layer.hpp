#pragma once

#include "strata/layer.hpp"
#include "strata/layers/relu_layer.hpp"

namespace strata {

// Combines bottoms of one shape element by element: SUM (with one coeff per bottom, default 1), PROD, or MAX
// (gradient to the first maximal bottom, ties between the first two going to the second as in Caffe). PROD's
// gradient is the product of the other inputs (stable_prod_grad, the default) or top / bottom. May run in place
// on bottom[0] for SUM and MAX.
template <typename Dtype>
class EltwiseLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Eltwise"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&max_index_}; }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return op_ == EltwiseParameter::PROD; }
  // A sum is value by value in any layout (the other operations read plain bottoms).
  bool AcceptsBlockedBottoms() const override { return op_ == EltwiseParameter::SUM; }
  // SUM reads and writes 16 bits on the GPU (Layer::GpuPrecision); PROD and MAX compute in float.
  bool ComputesIn16Bit() const override {
    return this->GpuPrecision() != ElementType::kOwn && op_ == EltwiseParameter::SUM;
  }
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override { return Layer<Dtype>::GpuOrder::kFollowsBottom; }
  bool BackwardNeedsTopData() const override {
    return (op_ == EltwiseParameter::PROD && !stable_prod_grad_) || relu_ != nullptr;
  }
  // A sum absorbs a ReLU (negative_slope >= 0) in place after it: the sum's forward and backward (CPU and GPU) apply it.
  bool Absorb(Layer<Dtype>& next) override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  std::vector<Dtype> coeffs_;
  bool stable_prod_grad_ = true;
  MemoryFormat layout_ = MemoryFormat::kPlain;     // the layout the last forward ran in
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;  // the order of the last GPU forward, which backward runs in
  ReLULayer<Dtype>* relu_ = nullptr;  // absorbed
  Blob<Dtype> max_index_;  // MAX: which bottom gave each output (kept for backward)
};

}  // namespace strata
