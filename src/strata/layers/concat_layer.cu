#include <type_traits>

#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/concat_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
void ConcatLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (ComputesInBf16()) {
      bfloat16* y = top[0]->mutable_gpu_data_bf16(/*keep_values=*/false);
      const int top_width = top[0]->shape(axis_) * inner_;
      int offset = 0;
      for (Blob<Dtype>* x : bottom) {
        const int width = x->shape(axis_) * inner_;
        gpu_copy_rows_bf16(outer_, width, x->gpu_data_bf16(), width, y + offset, top_width);
        offset += width;
      }
      return;
    }
  }
  Dtype* y = top[0]->mutable_gpu_data();
  const int top_width = top[0]->shape(axis_) * inner_;
  int offset = 0;
  for (Blob<Dtype>* x : bottom) {
    const int width = x->shape(axis_) * inner_;
    gpu_copy_rows(outer_, width, x->gpu_data(), width, y + offset, top_width);
    offset += width;
  }
}

template <typename Dtype>
void ConcatLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (bottom.size() == 1) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (ComputesInBf16()) {
      const bfloat16* dy = top[0]->gpu_diff_bf16();
      const int top_width = top[0]->shape(axis_) * inner_;
      int offset = 0;
      for (size_t b = 0; b < bottom.size(); ++b) {
        const int width = bottom[b]->shape(axis_) * inner_;
        if (propagate_down[b]) {
          gpu_copy_rows_bf16(outer_, width, dy + offset, top_width, bottom[b]->mutable_gpu_diff_bf16(false), width);
        }
        offset += width;
      }
      return;
    }
  }
  const Dtype* dy = top[0]->gpu_diff();
  const int top_width = top[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t b = 0; b < bottom.size(); ++b) {
    const int width = bottom[b]->shape(axis_) * inner_;
    if (propagate_down[b]) gpu_copy_rows(outer_, width, dy + offset, top_width, bottom[b]->mutable_gpu_diff(), width);
    offset += width;
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ConcatLayer);

}  // namespace strata
