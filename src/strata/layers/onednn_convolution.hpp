// Convolution through oneDNN, the CPU engine ConvolutionLayer runs for `engine: ONEDNN` (and DEFAULT, in float;
// docs/onednn.md), and its transpose, the engine of DeconvolutionLayer. Private to src/strata/layers.
//
// The weights are plain O x C/G x KH x KW, or in a training net kept in the layout oneDNN computes their gradient
// in (WeightedEngine::weights_layout, a CustomFormat of the blob); the activations are plain N x C x H x W or,
// where the net allows, in the channel-blocked layout (memory_format.hpp). oneDNN picks the layouts its kernels
// compute in: nChw16c where the channels come in blocks of 16, NHWC for 16 or more input channels that do not
// (onednn_convolution.cpp, Nhwc); what differs from the blob's layout is reordered within each call. The
// primitives are made once per shape and kept until the shape changes; the reordered data lives in the thread's
// call buffer (onednn::CallBuffer).
#pragma once

#include <vector>

#include "onednn_weighted_engine.hpp"
#include "strata/im2col.hpp"
#include "strata/layer.hpp"

namespace strata {
namespace onednn_conv {

// Everything that decides the primitives: the batch, the window and the channel counts.
struct Shape {
  int num = 0, num_output = 0, group = 1;
  bool bias = false;
  // The convolution of `geom` (input geom.channels x height x width) to num_output channels.
  ConvGeometry geom;
  // Multiply in bfloat16 (input, weights and output gradient rounded to it; sums, results and gradients in
  // float), where oneDNN has bfloat16 kernels for this CPU.
  bool bf16 = false;
  // Its transpose instead (Deconvolution): the engine's x is the convolution's output (num_output channels), its y
  // the convolution's input (geom.channels x height x width, with the bias), and the weights are still
  // num_output x geom.channels/group x KH x KW, Caffe's Deconvolution weights.
  bool transposed = false;
  // max(y, 0) applied to the output as a post-op (an absorbed ReLU: ConvolutionLayer::Absorb).
  bool relu = false;
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

// The passes of `layer` (a Convolution or Deconvolution whose engine this is) over each bottom and its top, with
// weights blob 0 and the bias blob 1 if `bias`. Forward reads each bottom in its layout and writes the top
// blocked where the layer may (top_may_block) and the kernel writes it so; Backward takes the gradients in their
// data's layouts, the weight gradient (where `weight_grad`) and db (null: not wanted) accumulate. The weights and
// their gradient are read and written in the engine's weights_layout() where it has one (a training net's layer
// from its first forward on), else plain.
void ForwardEach(Convolution& engine, Layer<float>& layer, bool bias, const std::vector<Blob<float>*>& bottom,
                 const std::vector<Blob<float>*>& top);
void BackwardEach(Convolution& engine, Layer<float>& layer, const std::vector<Blob<float>*>& top,
                  const std::vector<bool>& propagate_down, const std::vector<Blob<float>*>& bottom, bool weight_grad,
                  float* db);

}  // namespace onednn_conv
}  // namespace strata
