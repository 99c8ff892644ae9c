// Softmax through oneDNN, the CPU engine SoftmaxLayer (and so SoftmaxWithLoss's inner softmax) runs for
// `engine: ONEDNN` (and DEFAULT where measured faster; docs/onednn.md). Private to src/strata/layers.
//
// The blob is seen as Strata's own does, outer x channels x inner, plain (oneDNN's abc layout), the softmax over
// the middle axis: nothing is reordered. Backward reads the output, as Strata's own.
#pragma once

#include <memory>

namespace strata {
namespace onednn_softmax {

class Softmax {
 public:
  Softmax();
  ~Softmax();
  // Keeps the primitives when the shape is the one they were made for.
  void Configure(int outer, int channels, int inner);
  void Forward(const float* x, float* y);
  // dx = (dy - sum(dy * y)) * y over each fibre.
  void Backward(const float* y, const float* dy, float* dx);

 private:
  struct Primitives;
  int outer_ = -1, channels_ = -1, inner_ = -1;
  std::unique_ptr<Primitives> p_;
};

}  // namespace onednn_softmax
}  // namespace strata
