#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// Exponential linear unit: y = x for x > 0, alpha (e^x - 1) otherwise (elu_param.alpha, default 1). The
// gradient is 1 for x > 0 and alpha e^x = y + alpha otherwise (Caffe's form).
// For alpha >= 0, y > 0 exactly when x > 0, so backward reads only the top and the layer works in place (as
// ReLU does). A negative alpha breaks that: backward then reads the bottom (alpha e^x) and may not run in place.
template <typename Dtype>
class ELULayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit ELULayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param), alpha_(static_cast<Dtype>(param.elu_param().alpha())) {}
  const char* type() const override { return "ELU"; }
  bool BackwardNeedsBottomData() const override { return alpha_ < 0; }
  bool BackwardNeedsTopData() const override { return alpha_ >= 0; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype alpha_;
};

}  // namespace strata
