#pragma once

#include "strata/layer.hpp"

namespace strata {

// Nearest-neighbour upsampling by 2 along height and width: (N, C, H, W) -> (N, C, 2H, 2W), each input value
// copied into a 2 x 2 block. The decoder half of a U-Net climbs back to the encoder's resolution with it, so
// the long skip connections can be concatenated. Backward sums each block's gradients into its source value;
// it reads no data. Not in place. (Not a Caffe layer; a learned upsampling is a Convolution after it.)
template <typename Dtype>
class UpsampleLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Upsample"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
};

}  // namespace strata
