#pragma once

#include <memory>

#include "strata/layer.hpp"
#include "strata/syncedmem.hpp"

namespace strata {

// Keeps the items (indices along axis 0) whose selector value is non-zero, Caffe's Filter. Bottoms: the blobs
// to filter, then the selector, of shape (N) or (N, 1, 1, ...), N being every bottom's first extent; one top
// per filtered bottom, holding its selected items in order: (S, ...) for S selected. Backward copies each
// top's gradient back to the selected items and writes zero to the others; the selector gets no gradient
// (asking for one is an Error).
//
// As in Caffe, the tops keep all N items at set-up (so a net can be built before any selector exists), and a
// forward that selects nothing makes empty tops (S = 0); backward then writes zeros to every item.
template <typename Dtype>
class FilterLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Filter"; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != this->layer_param_.bottom_size() - 1;
  }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  void RefuseSelectorGradient(const std::vector<bool>& propagate_down) const {
    STRATA_REQUIRE(!propagate_down.back()) << this->describe() << " cannot backpropagate to its selector (the "
                                           << "last bottom): give that bottom propagate_down: false";
  }

  // In forward, where the selector holds this batch's values (a net is reshaped before any exist): an empty batch
  // would run the layers after it on nothing, loss 0 and no gradient, an iteration that looks trained and is not.
  void RequireSelection() const {
    STRATA_REQUIRE(selected_ > 0) << this->describe() << ": the selector (the last bottom) selects none of the "
                                  << "batch's " << items_ << " items (every value is 0), so the layers after it "
                                  << "would see an empty batch";
  }

  bool first_reshape_ = true;
  int items_ = 0;     // N
  int selected_ = 0;  // S
  // For each of the N items, its index among the tops' items, or -1 when it is filtered out (ints; read on the
  // device by the GPU kernels).
  std::shared_ptr<SyncedMemory> position_;
};

}  // namespace strata
