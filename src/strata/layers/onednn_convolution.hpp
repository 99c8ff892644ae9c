// Convolution through oneDNN, the CPU engine ConvolutionLayer runs for `engine: ONEDNN` (and DEFAULT, in float;
// docs/onednn.md). Private to src/strata/layers.
//
// The weights stay plain O x C/G x KH x KW; the activations are plain N x C x H x W or, where the net allows, in
// the channel-blocked layout (strata/layout.hpp). oneDNN picks the layouts its kernels compute in (nChw16c where
// the channels come in blocks of 16), except that channel counts which do not run on NHWC (onednn_convolution.cpp,
// Nhwc); what differs from the blob's layout is reordered within each call. The primitives are made once per shape
// and kept until the shape changes; the reordered data lives in the thread's call buffer (onednn::CallBuffer).
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
