#include "device_storage.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/concat_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

namespace {
// Each bottom is `rows` rows of its extent along the axis times `scale`, placed side by side in the top's rows.
struct ConcatRows {
  DeviceFormat format = DeviceFormat::kPlain;
  int rows = 0;
  int scale = 0;
};

// In `f`, the order of the first bottom (device_storage.cuh), where that keeps each bottom a run of rows:
// channels-last concatenates along the channels (N x S rows of C) or the images (each image one run), not along a
// spatial axis.
ConcatRows concat_rows(DeviceFormat f, int axis, int outer, int inner) {
  if (!is_channels_last(f)) return {f, outer, inner};
  if (axis > 1) return {device_format_for(element_type_of(f), /*channels_last=*/false), outer, inner};
  return axis == 1 ? ConcatRows{f, outer * inner, 1} : ConcatRows{f, outer, inner};
}
}  // namespace

template <typename Dtype>
void ConcatLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;
  const ConcatRows r =
      concat_rows(format_following(*bottom[0], this->GpuStorage()), axis_, outer_, inner_);
  const DeviceFormat f = r.format;
  gpu_format_ = f;
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f);
    const int top_width = top[0]->shape(axis_) * r.scale;
    int offset = 0;
    for (Blob<Dtype>* x : bottom) {
      const int width = x->shape(axis_) * r.scale;
      gpu_copy_rows_as(r.rows, width, gpu_data_as<T>(*x, f), width, y + offset, top_width);
      offset += width;
    }
  });
}

template <typename Dtype>
void ConcatLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (bottom.size() == 1) return;
  // In forward's order: the top's value may have been freed (it is not read) or converted by a reader since.
  const ConcatRows r = concat_rows(gpu_format_, axis_, outer_, inner_);
  const DeviceFormat f = r.format;
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    const T* dy = gpu_diff_as<T>(*top[0], f);
    const int top_width = top[0]->shape(axis_) * r.scale;
    int offset = 0;
    for (size_t b = 0; b < bottom.size(); ++b) {
      const int width = bottom[b]->shape(axis_) * r.scale;
      if (propagate_down[b]) {
        gpu_copy_rows_as(r.rows, width, dy + offset, top_width,
                         mutable_gpu_diff_as<T>(*bottom[b], /*keep_values=*/false, f), width);
      }
      offset += width;
    }
  });
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConcatLayer);

}  // namespace strata
