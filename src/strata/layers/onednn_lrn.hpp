// LRN through oneDNN, the CPU engine LRNLayer runs for `engine: ONEDNN` (and DEFAULT where measured faster;
// docs/onednn.md). Private to src/strata/layers.
//
// oneDNN's formula is Caffe's in both regions: y = x * (k + alpha / n * sum x^2)^-beta over the n channels centred
// on x (clipped at the edges) ACROSS_CHANNELS, and y = x * (k + alpha / n^2 * sum x^2)^-beta over the n x n window
// centred on x (zero outside the image, the divisor n^2 at the edges too: Caffe's padded average pooling)
// WITHIN_CHANNEL, where Caffe has no k (its 1 is passed). The layer's blobs stay plain N x C x H x W; where
// oneDNN has a faster kernel for a blocked layout (nChw16c, nChw8c) the data is reordered into it and back
// within each call. The primitives follow the shape as the convolution's do (onednn_convolution.hpp).
#pragma once

#include <cstddef>
#include <memory>

namespace strata {
namespace onednn_lrn {

struct Shape {
  int num = 0, channels = 0, height = 0, width = 0;
  int local_size = 5;
  float alpha = 1, beta = 0.75f, k = 1;
  bool across = true;
  bool operator==(const Shape& o) const;
};

class LRN {
 public:
  LRN();
  ~LRN();
  // Keeps the primitives when `shape` is the one they were made for, else makes the forward one anew.
  void Configure(const Shape& shape);
  // Bytes Forward keeps for Backward (oneDNN's own record, in its format; possibly 0). The caller owns them
  // (LRNLayer's scale blob, so that they are counted and planned as its scale was).
  size_t workspace_bytes() const;
  void Forward(const float* x, float* y, void* workspace);
  // dx (overwritten) from dy and x, with the workspace of the last Forward.
  void Backward(const float* x, const float* dy, float* dx, void* workspace);

 private:
  struct Primitives;
  Shape shape_;
  std::unique_ptr<Primitives> p_;
};

}  // namespace onednn_lrn
}  // namespace strata
