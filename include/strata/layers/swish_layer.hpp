#pragma once

#include "strata/layers/neuron_input.hpp"
#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = x sigmoid(beta x), element-wise (swish_param.beta, default 1). The gradient, with s = sigmoid(beta x), is
// dy (beta y + s (1 - beta y)) = dy (s + beta y (1 - s)), computed in the second form, which does not cancel. Backward recomputes s from the bottom rather than keeping it from
// the forward as Caffe does (one activation-sized buffer less); in place the forward keeps a copy of the input.
template <typename Dtype>
class SwishLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit SwishLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param), beta_(static_cast<Dtype>(param.swish_param().beta())) {}
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Swish"; }
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }
  bool BackwardWorksInPlace() const override { return true; }  // in place, forward keeps a copy (KeptInput)
  std::vector<Blob<Dtype>*> SavedActivations() override { return {input_.blob()}; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype beta_;
  KeptInput<Dtype> input_;
};

}  // namespace strata
