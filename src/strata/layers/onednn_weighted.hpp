// What the oneDNN engines of the layers with weights (Convolution, InnerProduct) share: one forward primitive
// with an optional bias, a backward-data and a backward-weights one, each operand a plain Strata tensor reordered
// where the primitive computes in another layout, and the weight and bias gradients added to the layer's (oneDNN
// overwrites its outputs, Strata's parameter gradients accumulate). Each engine makes the primitive descriptors
// for its own layer and leaves the running to this. Private to src/strata/layers.
#pragma once

#include "onednn_weighted_engine.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn {

struct WeightedPrimitives {
  virtual ~WeightedPrimitives() = default;

  // The plain layouts at the layer's boundary; `b` is empty without a bias.
  dnnl::memory::desc x, w, y, b;
  // What the multiplications read (input, weights, output gradient): f32, or bf16 (precision: BF16). Outputs and
  // gradients are f32 either way.
  dnnl::memory::data_type multiply = dnnl::memory::data_type::f32;

  // From the forward primitive descriptor (its src, weights, dst); then Forward runs.
  void InitForward(const dnnl::primitive_desc& pd);
  // From the backward ones; then Backward runs.
  void InitBackward(const dnnl::primitive_desc& data_pd, const dnnl::primitive_desc& weights_pd);
  bool have_backward() const { return have_backward_; }

  // y = f(x, w) + b (b is read only with a bias).
  void Forward(const float* x, const float* w, const float* b, float* y, Blocked blocked);
  // dx = the input gradient (skipped when dx is null); dw += the weight gradient and db += the bias gradient (each
  // skipped when null).
  void Backward(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                Blocked blocked);
  bool writes_blocked_output() const { return fwd_y_.computes_blocked(); }
  // The weights' CustomFormat (WeightedEngine::weights_layout), made by InitBackward; null where none applies.
  const CustomFormatPtr& weights_layout() const { return w_layout_; }

 private:
  dnnl::primitive fwd_;
  Operand fwd_x_, fwd_w_, fwd_y_;
  dnnl::memory fwd_b_;

  bool have_backward_ = false;
  dnnl::primitive bwd_data_;
  Operand bwd_data_dy_, bwd_data_w_, bwd_data_dx_;
  dnnl::primitive bwd_weights_;
  Operand bwd_weights_x_, bwd_weights_dy_, bwd_weights_dw_;
  // Both backward primitives read dy in the same layout: reorder it once per call.
  bool same_dy_layout_ = false;
  dnnl::memory bwd_weights_db_;
  // The weight and bias gradients of one call, plain, before they are added to the layer's: counts, and bytes
  // of the call buffer.
  size_t dw_count_ = 0, db_count_ = 0, dw_bytes_ = 0, db_bytes_ = 0;
  CustomFormatPtr w_layout_;
};

}  // namespace onednn
}  // namespace strata
