#pragma once

#include <memory>

#include "strata/layers/neuron_layer.hpp"

namespace strata {

namespace onednn_relu {
// oneDNN's primitives for the current count (src/strata/layers/onednn_relu.hpp).
class ReLU;
}  // namespace onednn_relu

// Rectified linear unit, leaky when relu_param.negative_slope != 0: y = x for x > 0, negative_slope * x
// otherwise. Usually run in place (top == bottom). For negative_slope >= 0, y > 0 exactly when x > 0, so
// backward reads the top and in-place use is exact; a negative slope breaks that, so backward then reads the
// bottom and the layer may not run backward in place.
//
// On the CPU, relu_param.engine picks who computes: CAFFE the loops of activation_kernels.hpp (the reference),
// ONEDNN oneDNN's eltwise relu (float only), DEFAULT oneDNN in float where measured faster (docs/onednn.md), the
// loops otherwise and in double.
template <typename Dtype>
class ReLULayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit ReLULayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param), negative_slope_(static_cast<Dtype>(param.relu_param().negative_slope())) {}
  const char* type() const override { return "ReLU"; }
  bool BackwardNeedsBottomData() const override { return negative_slope_ < 0; }
  bool BackwardNeedsTopData() const override { return negative_slope_ >= 0; }
  // Value by value, so any layout (on either engine: oneDNN's runs over the values as one flat vector).
  bool AcceptsBlockedBottoms() const override { return true; }
  Dtype negative_slope() const { return negative_slope_; }
  // Reads and writes 16 bits on the GPU (Layer::GpuPrecision).
  bool ComputesIn16Bit() const override { return this->GpuPrecision() != ElementType::kOwn; }
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override { return Layer<Dtype>::GpuOrder::kFollowsBottom; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  // Whether the CPU passes run through oneDNN (relu_param.engine, above).
  bool uses_onednn() const { return onednn_ != nullptr; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  // A negative slope's backward reads the bottom, which running in place has overwritten: an Error then.
  void RequireBackwardNotInPlace(const BlobVec& top, const BlobVec& bottom) const {
    STRATA_REQUIRE(negative_slope_ >= 0 || bottom[0] != top[0])
        << "ReLU with negative_slope " << negative_slope_
        << " < 0 cannot run backward in place (its output does not tell which side of 0 the input was); give "
           "it its own top blob";
  }

  Dtype negative_slope_;
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;  // the order of the last GPU forward, which backward runs in
  // Set when the engine picks oneDNN (float only).
  std::shared_ptr<onednn_relu::ReLU> onednn_;
};

}  // namespace strata
