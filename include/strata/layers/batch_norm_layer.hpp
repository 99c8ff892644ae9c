#pragma once

#include "strata/layer.hpp"
#include "strata/layers/relu_layer.hpp"
#include "strata/layers/scale_layer.hpp"

namespace strata {

// Normalises each channel (axis 1; the whole blob for a 1-D bottom) of an (N, C, ...) blob to zero mean and
// unit variance, Caffe's BatchNorm: no affine part (a Scale layer follows in Caffe nets).
//   TRAIN (use_global_stats false): batch mean and biased batch variance over N * spatial values; the three
//     blobs accumulate running sums: factor = factor * maf + 1, mean = maf * mean + batch mean,
//     variance = maf * variance + m / (m - 1) * batch variance (m = N * spatial).
//   use_global_stats (the default in TEST): mean = blob 0 / factor, variance = blob 1 / factor (0 when the
//     factor is 0).
// The three blobs are statistics, never learned: their param specs get lr_mult 0 (any other is an error).
// Works in place; backward reads only what forward keeps here (x_hat and 1/std).
// In TRAIN it absorbs (Layer::Absorb) the per-channel Scale that follows it in place in Caffe nets, and a ReLU in
// place after that: its forward and backward then compute BatchNorm + Scale (+ ReLU) in two passes over the
// blob each, instead of six and seven on the CPU (docs/onednn.md, "Fused BatchNorm, Scale and ReLU"), and in
// four passes forward and five backward on the GPU instead of ten and twelve (docs/gpu.md).
template <typename Dtype>
class BatchNormLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "BatchNorm"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&mean_, &variance_, &inv_std_, &x_hat_}; }
  std::vector<const Blob<Dtype>*> SavedIn16BitOnGpu() const override { return {&x_hat_}; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }
  // Per channel, in the channel-blocked layout too.
  bool AcceptsBlockedBottoms() const override { return true; }
  bool Absorb(Layer<Dtype>& next) override;
  // Reads and writes 16 bits on the GPU (Layer::GpuPrecision), with its absorbed Scale and ReLU.
  bool ComputesIn16Bit() const override { return this->GpuPrecision() != ElementType::kOwn; }
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override { return Layer<Dtype>::GpuOrder::kFollowsBottom; }
  bool IsStochastic() const override { return !use_global_stats_; }
  bool ParamIsStatistic(int param_id) const override { return param_id < 3; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
  // The GPU passes with the activations, their gradients and x_hat stored as T: Dtype, or Layer::GpuPrecision's
  // 16-bit type (the statistics, the running averages and the absorbed Scale's parameters stay Dtype).
  template <typename T>
  void ForwardGpuAs(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardGpuAs(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);
#endif

  bool use_global_stats_ = false;
  Dtype moving_average_fraction_ = 0;
  Dtype eps_ = 0;
  int num_ = 0, channels_ = 0, spatial_ = 0;
  Blob<Dtype> mean_;       // per channel: the mean used by the last forward
  Blob<Dtype> variance_;   // per channel: the batch variance (TRAIN); -mean/std (global stats)
  Blob<Dtype> inv_std_;    // per channel: 1 / sqrt(variance + eps), kept for backward
  Blob<Dtype> x_hat_;      // the normalised input, kept for backward (TRAIN only)
  MemoryFormat layout_ = MemoryFormat::kPlain;  // the layout the last forward ran in (and x_hat_ is in)
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;  // the order of the last GPU forward (and x_hat_'s), backward's
  Blob<Dtype> grad_mean_;  // per channel: mean(dy) and mean(dy * x_hat), backward scratch (2 x C)
  ScaleLayer<Dtype>* scale_ = nullptr;  // absorbed, with
  ReLULayer<Dtype>* relu_ = nullptr;    // absorbed after the Scale
  std::vector<Dtype> zero_bias_;        // the bias of an absorbed Scale without bias_term

 private:
  // The absorbed Scale's bias, or zeros without bias_term.
  const Dtype* AbsorbedBias() const;
};

}  // namespace strata
