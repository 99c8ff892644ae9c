#pragma once

#include "strata/layer.hpp"

namespace strata {

// The top_k largest values of the bottom, as Caffe's ArgMax (argmax_param):
//   axis given: along that axis; the top is the bottom's shape with that axis cut to top_k, and holds the
//     indices of the k largest values, largest first (their values instead when out_max_val).
//   no axis: over all of each item's values (axes 1 and on, flattened); the top is (N, 1, top_k) (more
//     trailing 1s for a bottom of more than 3 axes) holding the indices, or (N, 2, top_k) with out_max_val:
//     the indices, then the values.
// Order is Caffe's: (value, index) pairs sorted descending, so of equal values the larger index comes first.
// NaN inputs leave the order unspecified (as in Caffe, whose partial sort they break).
// ArgMax has no gradient: Caffe defines none, and Backward asked for the bottom's gradient is an Error.
template <typename Dtype>
class ArgMaxLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "ArgMax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  // (No Backward_gpu: the default runs Backward_cpu, which only refuses.)
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
#endif

  int top_k_ = 1;
  int dim_ = 0;     // values compared per search: the axis's extent, or count(1) without an axis
  int stride_ = 1;  // distance between them in memory: count(axis + 1), or 1 without an axis
  int searches_ = 0;  // count / dim: one search per position of the other axes
};

}  // namespace strata
