#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = |x|, element-wise. The gradient is dy * sign(x) with sign(0) = 0 (Caffe). Backward reads the bottom (|x|
// does not tell the sign), so the layer may run forward in place but not backward: that is an Error (Caffe
// refuses in place altogether).
template <typename Dtype>
class AbsValLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  const char* type() const override { return "AbsVal"; }
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace strata
