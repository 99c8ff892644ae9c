// Convolution through oneDNN, the CPU engine ConvolutionLayer runs for `engine: ONEDNN` (and DEFAULT, in float;
// docs/onednn.md). Private to src/strata/layers.
//
// The layer's blobs stay plain N x C x H x W (and O x C/G x KH x KW weights): oneDNN picks the layouts its
// kernels compute in (blocked ones such as nChw8c where they are faster), and the data is reordered into them
// and back within each call, so no other layer ever sees a oneDNN layout. The primitives are made once per shape and
// kept until the shape changes; the reordered data lives in the thread's call buffer (onednn::CallBuffer).
#pragma once

#include "onednn_weighted_engine.hpp"
#include "strata/im2col.hpp"

namespace strata {
namespace onednn_conv {

// Everything that decides the primitives: the batch, the window and the channel counts.
struct Shape {
  int num = 0, num_output = 0, group = 1;
  bool bias = false;
  ConvGeometry geom;
  // Multiply in bfloat16 (input, weights and output gradient rounded to it; sums, results and gradients in
  // float), where oneDNN has bfloat16 kernels for this CPU.
  bool bf16 = false;
  bool operator==(const Shape& o) const;
};

class Convolution : public onednn::WeightedEngine {
 public:
  // Keeps the primitives when `shape` is the one they were made for, else makes the forward one anew (the
  // backward ones follow on the first Backward).
  void Configure(const Shape& shape);

 private:
  struct Primitives;
  void MakeBackward() override;
  Shape shape_;
};

}  // namespace onednn_conv
}  // namespace strata
