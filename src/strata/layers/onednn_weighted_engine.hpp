// The part of the oneDNN engines of the layers with weights (Convolution, InnerProduct) that their layers call:
// Forward and Backward over primitives the engine made for the current shape (onednn_weighted.hpp, which this
// header keeps oneDNN's own headers out of). Private to src/strata/layers.
#pragma once

#include <memory>

#include "strata/memory_format.hpp"

namespace strata {
namespace onednn {

struct WeightedPrimitives;

// Which activations (and their gradients) are in the channel-blocked layout (memory_format.hpp) rather than plain:
// x (and dx), y (and dy); and whether the weights and their gradient are in the engine's weights_layout().
struct Blocked {
  bool x = false, y = false, w = false;
};

class WeightedEngine {
 public:
  WeightedEngine();
  virtual ~WeightedEngine();
  // y = f(x, w) + b (b may be null when the shape has no bias). The engine must be configured for a shape.
  void Forward(const float* x, const float* w, const float* b, float* y, Blocked blocked = {});
  // dx = the input gradient (skipped when dx is null, overwritten otherwise); dw += the weight gradient and
  // db += the bias gradient (each skipped when null). Gradients accumulate as every Strata layer's do.
  // `blocked.x` is the layout of x and dx, `blocked.y` that of dy.
  void Backward(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                Blocked blocked = {});
  // Whether the forward primitive writes y in the blocked layout itself (so a blocked y costs no reorder).
  bool writes_blocked_output() const;
  // Whether the primitives multiply in bfloat16 (the layer asked for it and this CPU has the kernels).
  bool bf16() const;
  // The layout the layer keeps its weights and their gradient in between calls: the one oneDNN computes the weight
  // gradient in, as a CustomFormat, so that neither is reordered per iteration; null (plain) before the backward
  // primitives exist, where that layout pads or is plain, and while param_layouts_enabled() is off.
  CustomFormatPtr weights_layout() const;
  // Makes the backward primitives now (a training net's first forward: its weights' layout is then known).
  void PrepareBackward();

 protected:
  // Makes the backward primitives of *p_ (on the first Backward: test nets never make them).
  virtual void MakeBackward() = 0;
  // The primitives for the current shape, made by the engine's Configure; null before.
  std::unique_ptr<WeightedPrimitives> p_;
};

}  // namespace onednn
}  // namespace strata
