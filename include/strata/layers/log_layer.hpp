#pragma once

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// y = log_base(shift + scale x), element-wise (log_param: base default -1, meaning e; scale 1; shift 0). base
// must be -1 or positive and not 1 (1 / ln(base) must be finite). Inputs with shift + scale x <= 0 give -inf or
// NaN, as in Caffe. The gradient is dy * scale / (ln(base) (shift + scale x)): backward reads the bottom, so
// the layer may run forward in place but not backward (an Error; in place Caffe silently reads the output
// there instead).
template <typename Dtype>
class LogLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  using NeuronLayer<Dtype>::NeuronLayer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Log"; }
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype base_scale_ = 1;          // 1 / ln(base)
  Dtype input_scale_ = 1, input_shift_ = 0;
  Dtype backward_num_scale_ = 1;  // scale / ln(base)
};

}  // namespace strata
