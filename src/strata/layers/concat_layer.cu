#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/concat_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
void ConcatLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;
  with_storage<Dtype>(ComputesInBf16(), [&](auto stored) {
    using T = decltype(stored);
    T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false);
    const int top_width = top[0]->shape(axis_) * inner_;
    int offset = 0;
    for (Blob<Dtype>* x : bottom) {
      const int width = x->shape(axis_) * inner_;
      gpu_copy_rows_as(outer_, width, gpu_data_as<T>(*x), width, y + offset, top_width);
      offset += width;
    }
  });
}

template <typename Dtype>
void ConcatLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (bottom.size() == 1) return;
  with_storage<Dtype>(ComputesInBf16(), [&](auto stored) {
    using T = decltype(stored);
    const T* dy = gpu_diff_as<T>(*top[0]);
    const int top_width = top[0]->shape(axis_) * inner_;
    int offset = 0;
    for (size_t b = 0; b < bottom.size(); ++b) {
      const int width = bottom[b]->shape(axis_) * inner_;
      if (propagate_down[b]) {
        gpu_copy_rows_as(outer_, width, dy + offset, top_width,
                         mutable_gpu_diff_as<T>(*bottom[b], /*keep_values=*/false), width);
      }
      offset += width;
    }
  });
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConcatLayer);

}  // namespace strata
