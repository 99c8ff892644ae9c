#pragma once

#include "strata/layer.hpp"

namespace strata {

// Provides the net's input blobs, shaped by input_param; the caller fills them before Forward.
template <typename Dtype>
class InputLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Shapes are set once; later reshapes are the caller's (reshaping a top directly).
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  const char* type() const override { return "Input"; }
  bool IsBatchSource() const override { return true; }
  bool IsNetInput() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {}
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}
};

}  // namespace strata
