#include "strata/layers/tile_layer.hpp"

#include <climits>

#include "shape_layer_util.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void TileLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const TileParameter& p = this->layer_param_.tile_param();
  const Blob<Dtype>& x = *bottom[0];
  const int axis = CheckedAxis(x, p.axis(), "tile_param.axis");
  STRATA_REQUIRE(p.has_tiles()) << "tile_param.tiles must be given: how many copies of the bottom to make";
  STRATA_REQUIRE(p.tiles() >= 1) << "tile_param.tiles must be at least 1, got " << p.tiles();
  tiles_ = p.tiles();
  std::vector<int> shape = x.shape();
  STRATA_REQUIRE(static_cast<long long>(shape[axis]) * tiles_ <= INT_MAX)
      << "tile_param.tiles " << tiles_ << " makes axis " << axis << " of the bottom of shape " << x.shape_string()
      << " too long";
  shape[axis] *= tiles_;
  top[0]->Reshape(shape);
  outer_ = x.count(0, axis);
  inner_ = x.count(axis);
}

template <typename Dtype>
void TileLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < outer_; ++i) {
    for (int t = 0; t < tiles_; ++t) {
      cpu_copy(inner_, x, y);
      y += inner_;
    }
    x += inner_;
  }
}

template <typename Dtype>
void TileLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < outer_; ++i) {
    cpu_copy(inner_, dy, dx);
    dy += inner_;
    for (int t = 1; t < tiles_; ++t) {
      cpu_axpy(inner_, Dtype(1), dy, dx);
      dy += inner_;
    }
    dx += inner_;
  }
}

STRATA_INSTANTIATE_CLASS(TileLayer);
REGISTER_LAYER_CLASS(Tile);

}  // namespace strata
