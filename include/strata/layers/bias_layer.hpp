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
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

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
// With `layout` kBlocked16 the tensors are in the channel-blocked layout, d being the channel (memory_format.hpp:
// dim a multiple of 16).
template <typename Dtype>
void broadcast_affine(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift, Dtype* y,
                      MemoryFormat layout = MemoryFormat::kPlain);

// out[d] = sum over o, i of a[o, d, i] * b[o, d, i] (b null: of a alone); added to out when `accumulate`.
template <typename Dtype>
void broadcast_reduce(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out,
                      MemoryFormat layout = MemoryFormat::kPlain);

// The sum of f(i) over i in [begin, end), in Dtype across eight independent partial sums that the compiler
// keeps in one vector register, returned in double for the caller's totals. For the many short rows of late
// layers (7 x 7) this is markedly cheaper than an OpenMP simd reduction, whose set-up and horizontal sum are
// paid per row.
#ifdef STRATA_USE_CUDA
// The same two operations on device pointers (bias_layer.cu), for Bias, Scale and BatchNorm on the GPU.
template <typename Dtype>
void gpu_broadcast_affine(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift,
                          Dtype* y);
template <typename Dtype>
void gpu_broadcast_reduce(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out);
#endif

template <typename Dtype, typename F>
inline double row_sum(int begin, int end, const F& f) {
  Dtype s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  int i = begin;
  for (; i + 8 <= end; i += 8) {
    s0 += f(i);
    s1 += f(i + 1);
    s2 += f(i + 2);
    s3 += f(i + 3);
    s4 += f(i + 4);
    s5 += f(i + 5);
    s6 += f(i + 6);
    s7 += f(i + 7);
  }
  for (; i < end; ++i) s0 += f(i);
  return static_cast<double>(((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)));
}

}  // namespace strata
