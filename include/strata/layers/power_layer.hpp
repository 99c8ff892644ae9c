#pragma once

#include <cmath>

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = (shift + scale x)^power, element-wise (power_param: power 1, scale 1, shift 0 by default), with Caffe's
// special cases: when power * scale == 0 the output is the constant shift^power (1 for power 0) and the gradient
// 0; for power 1 the gradient is the constant scale. Otherwise the gradient is
// dy * power * scale * (shift + scale x)^(power - 1), which reads the bottom: the layer may then run forward in
// place but not backward (an Error). (Caffe writes that gradient as power scale y / (shift + scale x), which
// is 0/0 = NaN where shift + scale x = 0; the form here gives the limit there, e.g. 0 for power > 1.)
// Non-integer powers of negative values are NaN, as with std::pow. power 1 and 2 are plain arithmetic; other
// powers call std::pow element by element.
template <typename Dtype>
class PowerLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit PowerLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param),
        power_(static_cast<Dtype>(param.power_param().power())),
        scale_(static_cast<Dtype>(param.power_param().scale())),
        shift_(static_cast<Dtype>(param.power_param().shift())),
        diff_scale_(power_ * scale_) {}
  const char* type() const override { return "Power"; }
  bool BackwardNeedsBottomData() const override { return !constant_gradient(); }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  // The output ignores the input (power * scale == 0).
  bool constant_output() const { return diff_scale_ == Dtype(0); }
  // The gradient ignores the input: 0, or scale for power 1.
  bool constant_gradient() const { return constant_output() || power_ == Dtype(1); }
  // What the constant output is.
  Dtype constant_value() const { return power_ == Dtype(0) ? Dtype(1) : std::pow(shift_, power_); }

  Dtype power_, scale_, shift_;
  Dtype diff_scale_;  // power * scale
};

}  // namespace strata
