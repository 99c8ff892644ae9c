#pragma once

#include "strata/layer.hpp"

namespace strata {

// Base of the element-wise layers (ReLU, Sigmoid, TanH, Dropout): one bottom, one top of the same shape; they
// may run in place (top == bottom).
template <typename Dtype>
class NeuronLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
};

}  // namespace strata
