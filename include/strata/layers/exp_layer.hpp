#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = base^(shift + scale x), element-wise (exp_param: base default -1, meaning e; scale 1; shift 0). base must
// be -1 or positive (and have a finite log). Computed as Caffe does, y = outer e^(inner x) with
// inner = scale ln(base) and outer = base^shift; the gradient is dy * inner * y, so backward reads only the top
// and the layer works in place.
template <typename Dtype>
class ExpLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Exp"; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return true; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype inner_scale_ = 1, outer_scale_ = 1;
};

}  // namespace strata
