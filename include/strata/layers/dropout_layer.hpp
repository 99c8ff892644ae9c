#pragma once

#include <cstdint>

#include "strata/layers/neuron_layer.hpp"

namespace strata {

// Dropout with Caffe's (inverted) scaling: in TRAIN each value is kept with probability 1 - dropout_ratio and
// scaled by 1 / (1 - dropout_ratio), else zeroed; in TEST the layer is the identity. Works in place.
//
// The mask is a counter-based hash of a 64-bit seed drawn from the calling thread's engine (Strata::rng()) at
// each TRAIN forward: reseeding that engine before Forward replays the same mask (the gradient checker and
// the recompute executor rely on this), and the mask does not depend on the number of OpenMP threads. It is
// kept between forward and backward as one byte per value.
template <typename Dtype>
class DropoutLayer : public NeuronLayer<Dtype> {
 public:
  using typename NeuronLayer<Dtype>::BlobVec;
  explicit DropoutLayer(const LayerParameter& param);
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Dropout"; }
  // Reads and writes 16 bits on the GPU (Layer::GpuPrecision).
  bool ComputesIn16Bit() const override { return this->GpuPrecision() != ElementType::kOwn; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&mask_}; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }
  bool IsStochastic() const override { return this->phase_ == TRAIN; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  Dtype scale_ = 1;          // 1 / (1 - dropout_ratio)
  uint64_t keep_below_ = 0;  // a value is kept when its 32-bit random number is below this (up to 2^32)
  Blob<Dtype> mask_;         // one byte per value (1: kept), in a blob for the memory accounting
};

}  // namespace strata
