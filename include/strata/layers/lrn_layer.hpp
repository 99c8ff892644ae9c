#pragma once

#include <memory>

#include "strata/layer.hpp"

namespace strata {

namespace onednn_lrn {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_lrn.hpp).
class LRN;
}  // namespace onednn_lrn

// Local response normalisation (Caffe's "LRN") of N x C x H x W: y = x * scale^-beta, with
//   ACROSS_CHANNELS: scale = k + alpha/n * (sum of x^2 over the n channels centred on this one, clipped at the
//                    edges);
//   WITHIN_CHANNEL:  scale = 1 + alpha/(n*n) * (sum of x^2 over the n x n window centred on this pixel, zero
//                    outside the image). As in Caffe, k does not enter this mode.
// n = local_size must be odd. The scale is kept for backward.
//
// ACROSS_CHANNELS slides the channel window as a running sum (one add and one subtract per channel), over
// blocks of contiguous pixels so the loops vectorise; WITHIN_CHANNEL sums windows separably (rows, then
// columns). beta = 0.75 (AlexNet's), 0.5 and 1 avoid pow().
//
// On the CPU, lrn_param.engine picks who computes: CAFFE the loops above (the reference); ONEDNN oneDNN's LRN
// (float only; its formula is Caffe's in both regions, docs/onednn.md), which keeps its own record of the forward
// in the scale blob's memory instead of the scale; DEFAULT oneDNN in float where measured faster, the loops above
// otherwise and in double.
template <typename Dtype>
class LRNLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "LRN"; }
  // Reads and writes 16 bits on the GPU (Layer::GpuPrecision); its scale stays float.
  bool ComputesIn16Bit() const override { return this->GpuPrecision() != ElementType::kOwn; }
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override { return Layer<Dtype>::GpuOrder::kFollowsBottom; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&scale_}; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // The input gradient reads x, y and the kept scale.
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return true; }

  // Whether the CPU passes for the current shape run through oneDNN (lrn_param.engine, above).
  bool uses_onednn() const { return onednn_active_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  void AcrossForward(const Dtype* x, Dtype* y);
  void AcrossBackward(const Dtype* x, const Dtype* y, const Dtype* dy, Dtype* dx);
  void WithinForward(const Dtype* x, Dtype* y);
  void WithinBackward(const Dtype* x, const Dtype* y, const Dtype* dy, Dtype* dx);

  int size_ = 5;
  Dtype alpha_ = 1, beta_ = 0.75, k_ = 1;
  bool across_ = true;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob<Dtype> scale_;      // the scale of every input value, kept for backward
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;  // the order of the last GPU forward, scale_'s
  Blob<Dtype> workspace_;  // WITHIN_CHANNEL: per-thread planes for the separable window sums
  int thread_slots_ = 1;
  // Set when the engine picks oneDNN (float only); onednn_active_ when the current shape runs through it.
  std::shared_ptr<onednn_lrn::LRN> onednn_;
  bool onednn_active_ = false;
};

}  // namespace strata
