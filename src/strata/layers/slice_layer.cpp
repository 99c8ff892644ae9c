#include "strata/layers/slice_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SliceLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SliceParameter& p = this->layer_param_.slice_param();
  STRATA_REQUIRE(!(p.has_axis() && p.has_slice_dim())) << "give slice_param.axis or the legacy slice_dim, not both";
  STRATA_REQUIRE(p.slice_point_size() == 0 || p.slice_point_size() == static_cast<int>(top.size()) - 1)
      << p.slice_point_size() << " slice_points for " << top.size() << " tops: give one fewer than the tops, or none";
}

template <typename Dtype>
void SliceLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const SliceParameter& p = this->layer_param_.slice_param();
  const Blob<Dtype>& x = *bottom[0];
  if (p.has_slice_dim()) {
    STRATA_REQUIRE(p.slice_dim() < static_cast<unsigned>(x.num_axes()))
        << "slice_dim " << p.slice_dim() << " out of range for a bottom of shape " << x.shape_string();
    axis_ = static_cast<int>(p.slice_dim());
  } else {
    axis_ = x.CanonicalAxisIndex(p.axis());
  }
  const int extent = x.shape(axis_);
  const int tops = static_cast<int>(top.size());
  sizes_.clear();
  if (p.slice_point_size() > 0) {
    int prev = 0;
    for (int i = 0; i <= p.slice_point_size(); ++i) {
      const int point = i < p.slice_point_size() ? static_cast<int>(p.slice_point(i)) : extent;
      STRATA_REQUIRE(point > prev && point <= extent)
          << "slice_points must increase strictly within (0, " << extent << "), the extent of axis " << axis_
          << " of the bottom of shape " << x.shape_string();
      sizes_.push_back(point - prev);
      prev = point;
    }
  } else {
    STRATA_REQUIRE(extent % tops == 0) << "axis " << axis_ << " of the bottom of shape " << x.shape_string()
                                       << " does not divide into " << tops << " equal pieces";
    sizes_.assign(tops, extent / tops);
  }
  outer_ = x.count(0, axis_);
  inner_ = x.count(axis_ + 1);
  for (int t = 0; t < tops; ++t) {
    std::vector<int> shape = x.shape();
    shape[axis_] = sizes_[t];
    top[t]->Reshape(shape);
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  const int bottom_width = bottom[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const int width = sizes_[t] * inner_;
    cpu_copy_rows(outer_, width, x + offset, bottom_width, top[t]->mutable_cpu_data(), width);
    offset += width;
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int bottom_width = bottom[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const int width = sizes_[t] * inner_;
    cpu_copy_rows(outer_, width, top[t]->cpu_diff(), width, dx + offset, bottom_width);
    offset += width;
  }
}

STRATA_INSTANTIATE_CLASS(SliceLayer);
REGISTER_LAYER_CLASS(Slice);

}  // namespace strata
