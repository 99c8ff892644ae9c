// InnerProduct through oneDNN, the CPU engine InnerProductLayer runs for `engine: ONEDNN` (and DEFAULT where
// measured faster; docs/onednn.md). Private to src/strata/layers.
//
// The input is Caffe's M x K matrix (the axes before `axis` flattened into M rows, the rest into K), the weights
// N x K, or K x N with `transpose` (oneDNN's "io" layout of the same N x K matrix: no copy is made of them by
// Strata; oneDNN reads them as they lie where its kernels allow, else through a reorder). The primitives follow
// the shape as the convolution's do (onednn_convolution.hpp).
#pragma once

#include "onednn_weighted_engine.hpp"

namespace strata {
namespace onednn_ip {

struct Shape {
  int rows = 0, inputs = 0, outputs = 0;  // M, K, N
  bool transpose = false, bias = false;
  // Multiply in bfloat16 (input, weights and output gradient rounded to it; sums, results and gradients in
  // float), where oneDNN has bfloat16 kernels for this CPU (as onednn_conv::Shape::bf16).
  bool bf16 = false;
  bool operator==(const Shape& o) const;
};

// y = x w^T + b; Configure as the convolution's (onednn_convolution.hpp).
class InnerProduct : public onednn::WeightedEngine {
 public:
  void Configure(const Shape& s);

 private:
  void MakeBackward() override;
  struct Primitives;
  Shape shape_;
};

}  // namespace onednn_ip
}  // namespace strata
