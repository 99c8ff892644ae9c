// MAX and AVE pooling through oneDNN, the CPU engine PoolingLayer runs for `engine: ONEDNN` (and DEFAULT where
// measured faster) when oneDNN's result is Caffe's for the window (docs/onednn.md). Private to src/strata/layers.
// The primitives follow the shape as the convolution's do (onednn_convolution.hpp).
#pragma once

#include <cstddef>
#include <memory>

namespace strata {
namespace onednn_pool {

// The input, the output size (Caffe's rounding, already applied) and the window.
struct Shape {
  int num = 0, channels = 0, height = 0, width = 0, pooled_h = 0, pooled_w = 0;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool max = true;
  bool operator==(const Shape& o) const;
};

// Why oneDNN's pooling would not give Caffe's result for `s`, or nullptr when it does. Caffe drops padded
// values from a maximum (as oneDNN does) and divides an average by the window clipped to [-pad, size + pad);
// oneDNN divides by the whole window (include padding) or by its part inside the image (exclude padding), which
// is Caffe's divisor when there is no padding, or when every window lies inside the padded image.
const char* Mismatch(const Shape& s);

class Pooling {
 public:
  Pooling();
  ~Pooling();
  // Keeps the primitives when `shape` is the one they were made for, else makes the forward ones anew: one set
  // on plain NCHW and, where the channels are a multiple of 16 (and blocked layouts are enabled), one on the
  // channel-blocked layout (strata/memory_format.hpp), so that pooling between two blocked layers reorders nothing.
  void Configure(const Shape& shape);
  bool has_blocked() const { return blocked_ != nullptr; }
  // Bytes MAX keeps from Forward for Backward (where each maximum came from, in oneDNN's format); 0 for AVE. The
  // caller owns them (PoolingLayer's mask blob, so that they are counted and planned as its argmax was).
  size_t workspace_bytes() const;
  // Where an argument is `blocked`, its memory is in the blocked layout (has_blocked() must hold); a blocked x
  // runs the blocked primitives, whatever y's layout (a plain y is reordered into).
  void Forward(const float* x, float* y, void* workspace, bool x_blocked = false, bool y_blocked = false);
  // dx (overwritten) from dy, with the primitives of the last Forward: MAX routes through the workspace it filled.
  void Backward(const float* dy, float* dx, void* workspace, bool dy_blocked = false, bool dx_blocked = false);

 private:
  struct Primitives;
  std::unique_ptr<Primitives> Make(bool blocked) const;
  Shape shape_;
  std::unique_ptr<Primitives> plain_, blocked_;
  Primitives* last_ = nullptr;  // the set the last Forward ran
};

}  // namespace onednn_pool
}  // namespace strata
