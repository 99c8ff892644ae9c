#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

// A contiguous blob seen as (outer, dim, inner), with a vector of `dim` values broadcast over outer and inner
// (see the kernels below the class).
struct BroadcastGeometry {
  int outer = 0, dim = 0, inner = 0;
};

// Adds a bias broadcast over a blob: top = bottom[0] + b, where b covers the axes [axis, axis + num_axes) of
// bottom[0] (num_axes -1: to the end). b is a learned blob, or the second bottom (whose own shape then gives
// num_axes). Works in place.
template <typename Dtype>
class BiasLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Bias"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

  BroadcastGeometry geom_;
};

// ---- Broadcast kernels shared by Bias, Scale and BatchNorm ----

// The shape of a broadcast parameter for `x`: x's axes [axis, axis + num_axes), or [axis, end) for num_axes -1.
// Bad axis/num_axes are user errors.
template <typename Dtype>
std::vector<int> BroadcastParamShape(const Blob<Dtype>& x, int axis, int num_axes);

// Where `p` (a parameter or second bottom) sits in `x` when it starts at `axis` (Caffe: a 0-axis p, a scalar,
// sits at axis 0). p's shape must equal the axes of x it covers; `what` names p in the error message.
template <typename Dtype>
BroadcastGeometry BroadcastGeometryOf(const Blob<Dtype>& x, const Blob<Dtype>& p, int axis, const char* what);

// y[o, d, i] = x[o, d, i] * scale[d] + shift[d]; a null scale reads as 1, a null shift as 0. y may be x.
template <typename Dtype>
void broadcast_affine(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift, Dtype* y);

// out[d] = sum over o, i of a[o, d, i] * b[o, d, i] (b null: of a alone); added to out when `accumulate`.
template <typename Dtype>
void broadcast_reduce(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out);

}  // namespace strata
