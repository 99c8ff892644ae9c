// ReLU through oneDNN's eltwise primitive, the CPU engine ReLULayer runs for `engine: ONEDNN` (and DEFAULT where
// measured faster; docs/onednn.md). Private to src/strata/layers.
//
// Element-wise, so the blob is one plain vector of its count values and nothing is reordered. oneDNN's relu with
// alpha = negative_slope is Caffe's: y = x for x > 0, alpha * x otherwise; its gradient dy for x > 0, alpha * dy
// otherwise. For negative_slope >= 0 backward reads the output (y > 0 exactly when x > 0, oneDNN's "use dst for
// backward" form), so the layer runs in place as Strata's own does; a negative slope reads the input.
#pragma once

#include <memory>

namespace strata {
namespace onednn_relu {

class ReLU {
 public:
  ReLU();
  ~ReLU();
  // Keeps the primitives when `count` and `slope` are those they were made for.
  void Configure(long count, float slope);
  // y = relu(x); y may be x.
  void Forward(const float* x, float* y);
  // dx = relu'(dy) from `sign_source`: the output y for negative_slope >= 0, the input x otherwise. dx may be dy.
  void Backward(const float* sign_source, const float* dy, float* dx);

 private:
  struct Primitives;
  long count_ = -1;
  float slope_ = 0;
  std::unique_ptr<Primitives> p_;
};

}  // namespace onednn_relu
}  // namespace strata
