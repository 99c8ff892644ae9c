#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

// Caffe's BatchReindex: top row k is bottom[0]'s row permut[k], with permut = bottom[1] (1-D, integer values in
// [0, N)); rows may repeat or be left out, so the top has as many rows as bottom[1] has values. Backward sums
// into each bottom row the gradients of the top rows that copied it, in ascending top order on the CPU and the
// GPU alike; the indices take no gradient.
template <typename Dtype>
class BatchReindexLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "BatchReindex"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  // The indices as ints, checked (an index that is not an integer in [0, N) is an Error naming the layer).
  const std::vector<int>& CheckedIndices(const Blob<Dtype>& permut, int rows);
  // For backward: top rows grouped by the bottom row they copy, ascending (CSR: begin_[r] .. begin_[r + 1]).
  void GroupByBottomRow(int rows);

  std::vector<int> index_;
  std::vector<int> begin_, top_rows_;
  Blob<Dtype> groups_;  // begin_ then top_rows_ as ints, for the GPU
  int inner_ = 0;       // values per row
};

}  // namespace strata
