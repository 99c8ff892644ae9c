#pragma once

#include "strata/layer.hpp"

namespace strata {

// Repeats the bottom tile_param.tiles times along tile_param.axis (default 1): the top's extent there is tiles
// times the bottom's, and each block of the axes from `axis` on is copied `tiles` times in a row (Caffe's Tile;
// bottom (2, 3) tiled twice on axis 1 gives rows [a b c a b c]). Backward sums the copies' gradients.
template <typename Dtype>
class TileLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Tile"; }
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

  int tiles_ = 1;
  int outer_ = 0;  // product of the axes before `axis`
  int inner_ = 0;  // product of the axes from `axis` on: one block, copied `tiles_` times
};

}  // namespace strata
