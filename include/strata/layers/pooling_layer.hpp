#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "strata/layer.hpp"

namespace strata {

namespace onednn_pool {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_pooling.hpp).
class Pooling;
}  // namespace onednn_pool

// Max or average pooling over 2-D windows of N x C x H x W (Caffe's "Pooling"), with Caffe's output size rule
// (ceil rounding by default, and a last window that must start inside the image), its average divisor (the
// window clipped to the padded image, padding counted) and its max tie-break (the first maximum in row-major
// order). MAX keeps the argmax of every output (index h*W + w within its plane) for backward, and writes it to
// an optional second top as Caffe does (backward uses its own copy, not the top). STOCHASTIC (no padding, as in
// Caffe) draws one element per window with probability proportional to its value in TRAIN, keeping its index as
// MAX does, and outputs the probability-weighted mean sum(x^2) / sum(x) in TEST; its draws come from the solver's
// seeded stream through a counter-based generator, so the GPU picks what the CPU picks.
//
// The loops run over kernel offsets outermost and output columns innermost, so the inner loop is a contiguous
// (or strided) sweep the compiler vectorises, rather than a small window per output; MAX is separable (down
// the window's columns, then across them).
//
// On the CPU, pooling_param.engine picks who computes: CAFFE the loops above (the reference); ONEDNN oneDNN (float,
// MAX and AVE without the mask top, where oneDNN's result is Caffe's: anything else is an error); DEFAULT oneDNN
// where that holds and oneDNN was measured faster (docs/onednn.md), the loops above otherwise.
template <typename Dtype>
class PoolingLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Pooling"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&mask_}; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX can output its argmax mask as a second top.
  int MaxTopBlobs() const override {
    return this->layer_param_.pooling_param().pool() == PoolingParameter::MAX ? 2 : 1;
  }
  // Backward reads only the kept argmax (MAX, STOCHASTIC in TRAIN) or nothing (AVE); STOCHASTIC in TEST
  // differentiates the weighted mean, which needs the input.
  bool BackwardNeedsBottomData() const override { return stochastic() && this->phase_ == TEST; }
  bool BackwardNeedsTopData() const override { return false; }
  bool IsStochastic() const override { return stochastic() && this->phase_ == TRAIN; }
  // MAX and AVE read and write 16 bits on the GPU (Layer::GpuPrecision); STOCHASTIC computes in float.
  bool ComputesIn16Bit() const override {
    return this->GpuPrecision() != ElementType::kOwn && !stochastic();
  }
  bool TopHoldsIndices(int index) const override { return index == 1; }  // the mask
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override {
    return stochastic() ? Layer<Dtype>::GpuOrder::kChannelsFirst : Layer<Dtype>::GpuOrder::kFollowsBottom;
  }

  // Whether the CPU passes for the current shape run through oneDNN (pooling_param.engine, above).
  bool uses_onednn() const { return onednn_active_; }
  // oneDNN pools the channel-blocked layout as it is (channels a multiple of 16); Strata's loops read it plain.
  bool AcceptsBlockedBottoms() const override { return onednn_ != nullptr; }

  // One plane's window geometry (public for the loops in the .cpp).
  struct Window {
    int height, width, pooled_h, pooled_w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  };

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  bool stochastic() const { return this->layer_param_.pooling_param().pool() == PoolingParameter::STOCHASTIC; }
  // TRAIN STOCHASTIC pooling's forward (CPU): one draw per output, its index in mask_.
  void StochasticForward_cpu(const Dtype* x, Dtype* y, int planes, uint64_t seed);
  // TEST STOCHASTIC pooling's backward (CPU).
  void WeightedMeanBackward_cpu(const Dtype* x, const Dtype* dy, Dtype* dx, int planes);

  bool max_ = true;
  // What backward routes through mask_: MAX, and STOCHASTIC in TRAIN.
  bool keeps_index_ = true;
  bool global_ = false;
  Window win_{};
  // MAX: the argmax of each output as an int (h*W + w, -1 for an empty window) in a Dtype blob's memory; the
  // optional mask top gets the same values as Dtype.
  Blob<Dtype> mask_;
  // The order of the last GPU forward (mask_ is indexed in it), which backward runs in.
  DeviceFormat gpu_format_ = DeviceFormat::kPlain;
  // AVE: for each output, the window size Caffe divides by (clipped to the padded image), planar.
  std::vector<Dtype> divisor_;
  // MAX: per OpenMP thread, one input row of column maxima and their indices.
  Blob<Dtype> row_buffers_;
  int thread_slots_ = 1;
  // Set when the engine allows oneDNN for this layer; onednn_active_ when the current shape runs through it.
  std::shared_ptr<onednn_pool::Pooling> onednn_;
  bool onednn_active_ = false;
};

}  // namespace strata
