#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// Binomial normal log likelihood (softplus): y = log(1 + e^x), computed as max(x, 0) + log(1 + e^-|x|) so that
// it neither overflows nor loses the tails. Its derivative is sigmoid(x) = 1 - e^-y: backward reads only the
// top, so the layer works in place (Caffe reads the bottom, which in place would be the overwritten output).
template <typename Dtype>
class BNLLLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  const char* type() const override { return "BNLL"; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return true; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace strata
