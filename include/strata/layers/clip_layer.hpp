#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = min(max(x, clip_param.min), clip_param.max), element-wise (both bounds required, min <= max). The
// gradient passes where min <= x <= max, bounds included (Caffe), and is 0 elsewhere. A NaN input stays NaN
// (Caffe's CPU code turns it into min, its GPU code into max) and gets gradient 0.
// Backward reads the bottom: the output cannot tell an input on a bound from one beyond it. So the layer may run
// forward in place but not backward: that is an Error (Caffe would silently pass the gradient everywhere).
template <typename Dtype>
class ClipLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Clip"; }
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype min_ = 0, max_ = 0;
};

}  // namespace strata
