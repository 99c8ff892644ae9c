#pragma once

#include "strata/layers/neuron_input.hpp"
#include "strata/layers/neuron_layer.hpp"

namespace strata {

// Parametric ReLU: y = x for x > 0, a_c x otherwise, with a learned slope a_c per channel (axis 1), or one slope
// for the whole blob with prelu_param.channel_shared. Parameter blob: the slopes, shape (channels) or () when
// shared, filled by prelu_param.filler (default constant 0.25). The bottom needs at least 2 axes.
// Gradients: dx = dy for x > 0, a_c dy otherwise; da_c accumulates dy x over the x <= 0 of channel c.
// Both read the input; in place (which Caffe allows) the forward keeps a copy of it for the backward.
template <typename Dtype>
class PReLULayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "PReLU"; }
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

  // The blob as (outer, channels, inner): a slope per channel, or one (channels 1) when shared.
  int outer_ = 0, channels_ = 0, inner_ = 0;
  bool channel_shared_ = false;
  KeptInput<Dtype> input_;
};

}  // namespace strata
