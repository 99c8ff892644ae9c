#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = 1 where x > threshold_param.threshold (default 0), 0 elsewhere (NaN included), element-wise; works in
// place.
//
// Backward: the output is a step function, whose derivative is 0 everywhere but at the threshold itself, so a
// gradient asked of this layer is written as zeros. Caffe implements no backward (asking for one aborts the
// process). A Caffe net never reaches it (Threshold on a path that gets no gradient, or cut off with
// propagate_down: false), so such nets run unchanged; a net that would have aborted trains instead, with no
// learning signal through this layer, which is the exact gradient of the function it computes. Backward reads
// neither the bottom nor the top.
template <typename Dtype>
class ThresholdLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit ThresholdLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param), threshold_(static_cast<Dtype>(param.threshold_param().threshold())) {}
  const char* type() const override { return "Threshold"; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype threshold_;
};

}  // namespace strata
