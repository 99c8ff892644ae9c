// Convolution through oneDNN, the CPU engine ConvolutionLayer runs for `engine: ONEDNN` (and DEFAULT, in float;
// docs/onednn.md). Private to src/strata/layers.
//
// The layer's blobs stay plain N x C x H x W (and O x C/G x KH x KW weights): oneDNN picks the layouts its
// kernels compute in (blocked ones such as nChw8c where they are faster), and the data is reordered into them
// and back within each call, so no other layer ever sees a oneDNN layout. The primitives and the buffers of the
// reordered data are made once per shape and kept until the shape changes.
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
