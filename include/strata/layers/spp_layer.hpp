#pragma once

#include <memory>
#include <vector>

#include "strata/layers/pooling_layer.hpp"

namespace strata {

// Caffe's "SPP" (spatial pyramid pooling): for levels l = 0 .. spp_param.pyramid_height - 1, pooling of
// N x C x H x W into 2^l x 2^l bins (kernel ceil(H / 2^l), stride = kernel, pad half the shortfall rounded up, as
// Caffe computes it), each level flattened to N x (C * 4^l) and the levels concatenated in order: a top of
// N x (C * sum_l 4^l). With pyramid_height 1 the top is the one level's N x C x 1 x 1, as in Caffe. An input too
// small for the finest level (its padding would reach the kernel size) is refused. MAX and AVE as Pooling does
// them; STOCHASTIC is handed to Pooling (in this layer's phase) and works where Pooling supports it.
//
// The levels are Pooling layers run on the bottom itself (no split copy); their outputs are copied into the top's
// rows, and in backward their gradients are summed into the bottom's. On the GPU the pooling layers run their own
// kernels and the copies are device copies (no kernels of its own: Forward_gpu/Backward_gpu live in the .cpp).
template <typename Dtype>
class SPPLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "SPP"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // What the levels' pooling needs and keeps (MAX and AVE: no bottom data, the argmax kept).
  bool BackwardNeedsBottomData() const override;
  bool BackwardNeedsTopData() const override { return false; }
  bool IsStochastic() const override;
  std::vector<Blob<Dtype>*> SavedActivations() override;

  // The pooling parameters of level `level` (2^level bins per side) for an H x W input, as Caffe builds them.
  static PoolingParameter LevelParam(int level, int height, int width, SPPParameter::PoolMethod pool);

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override { ForwardLevels(bottom, top, false); }
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {
    BackwardLevels(top, propagate_down, bottom, false);
  }
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override { ForwardLevels(bottom, top, true); }
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {
    BackwardLevels(top, propagate_down, bottom, true);
  }
#endif

 private:
  // The pooling layers run in the current mode; `gpu` says where the copies between them and the top run.
  void ForwardLevels(const BlobVec& bottom, const BlobVec& top, bool gpu);
  void BackwardLevels(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom, bool gpu);
  // (Re)creates the levels' pooling layers for the bottom's height and width.
  void BuildLevels(const BlobVec& bottom, const BlobVec& top);

  int pyramid_height_ = 0;
  int height_ = -1, width_ = -1;  // the input size the levels were built for
  std::vector<std::unique_ptr<PoolingLayer<Dtype>>> levels_;
  std::vector<std::unique_ptr<Blob<Dtype>>> pooled_;  // each level's N x C x 2^l x 2^l (pyramid_height > 1)
  Blob<Dtype> level_grad_;  // the bottom gradient of levels after the first, before it is summed
};

}  // namespace strata
