#include "strata/layers/crop_layer.hpp"

#include "crop_map.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// The length of the blob's last axis (1 for a scalar).
template <typename Dtype>
int RowLength(const Blob<Dtype>& b) {
  return b.num_axes() > 0 ? b.shape(-1) : 1;
}

}  // namespace

template <typename Dtype>
void CropLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const CropParameter& p = this->layer_param_.crop_param();
  start_axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
  const int cropped = bottom[0]->num_axes() - start_axis_;
  STRATA_REQUIRE(p.offset_size() <= 1 || p.offset_size() == cropped)
      << "Crop: crop_param.offset must be given once for all cropped axes or once per cropped axis: axis "
      << start_axis_ << " of the " << bottom[0]->num_axes() << "-axis input " << bottom[0]->shape_string()
      << " leaves " << cropped << " axes to crop, got " << p.offset_size() << " offsets";
}

template <typename Dtype>
void CropLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const CropParameter& p = this->layer_param_.crop_param();
  const Blob<Dtype>& x = *bottom[0];
  const Blob<Dtype>& ref = *bottom[1];
  const int axes = x.num_axes();
  STRATA_REQUIRE(ref.num_axes() >= axes)
      << "Crop: the reference (bottom 1, shape " << ref.shape_string() << ") has fewer axes than the input "
      << x.shape_string();
  std::vector<int> shape = x.shape();
  offsets_.assign(axes, 0);
  for (int i = start_axis_; i < axes; ++i) {
    const int offset = p.offset_size() == 0 ? 0 : static_cast<int>(p.offset(p.offset_size() == 1 ? 0 : i - start_axis_));
    STRATA_REQUIRE(offset >= 0 && static_cast<long>(offset) + ref.shape(i) <= x.shape(i))
        << "Crop: the crop of axis " << i << " is out of bounds: offset " << offset << " + size " << ref.shape(i)
        << " (of the reference " << ref.shape_string() << ") exceeds the input's " << x.shape(i) << " (input "
        << x.shape_string() << ")";
    shape[i] = ref.shape(i);
    offsets_[i] = offset;
  }
  top[0]->Reshape(shape);
}

template <typename Dtype>
void CropLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int count = top[0]->count();
  if (count == 0) return;
  const CropMap map(bottom[0]->shape(), top[0]->shape(), offsets_);
  // The last axis is contiguous in both: one copy per row of it.
  const int inner = RowLength(*top[0]);
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (long long r = 0; r < count; r += inner) cpu_copy(inner, x + map.bottom_index(r), y + r);
}

template <typename Dtype>
void CropLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    cpu_set(bottom[1]->count(), Dtype(0), bottom[1]->mutable_cpu_diff());
  }
  if (!propagate_down[0]) return;
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), Dtype(0), dx);
  const int count = top[0]->count();
  if (count == 0) return;
  const CropMap map(bottom[0]->shape(), top[0]->shape(), offsets_);
  const int inner = RowLength(*top[0]);
  const Dtype* dy = top[0]->cpu_diff();
  for (long long r = 0; r < count; r += inner) cpu_copy(inner, dy + r, dx + map.bottom_index(r));
}

STRATA_INSTANTIATE_CLASS(CropLayer);
REGISTER_LAYER_CLASS(Crop);

}  // namespace strata
