#pragma once

#include "strata/layer.hpp"

namespace strata {

// Joins bottoms along one axis (concat_param.axis, default 1; the legacy concat_dim when axis is not set);
// every other dimension must match. With a single bottom the top shares its memory.
template <typename Dtype>
class ConcatLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Concat"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }
  // Copies 16 bits on the GPU (Layer::GpuPrecision).
  bool ComputesIn16Bit() const override { return this->GpuPrecision() != ElementType::kOwn; }
  // Channels-last along the channels or the images (concat_layer.cu).
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override {
    return axis_ <= 1 ? Layer<Dtype>::GpuOrder::kFollowsBottom : Layer<Dtype>::GpuOrder::kChannelsFirst;
  }
  // Joining 4-axis blobs along the channels, each a multiple of 16 of them, copies the same contiguous runs in the
  // channel-blocked layout as in the plain one (each bottom's n-th image is C_i x H x W values in both), so the
  // layer concatenates in either (strata/memory_format.hpp).
  bool AcceptsBlockedBottoms() const override { return blockable_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

  int axis_ = 1;
  int outer_ = 0;  // product of the axes before `axis`
  int inner_ = 0;  // product of the axes after `axis`
  bool blockable_ = false;  // several bottoms joined along the channels, all in blocks of 16 (Reshape)
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;  // the order of the last GPU forward, which backward runs in
};

}  // namespace strata
