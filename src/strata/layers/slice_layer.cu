#include "strata/cuda.hpp"
#include "strata/layers/slice_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
void SliceLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->gpu_data();
  const int bottom_width = bottom[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const int width = sizes_[t] * inner_;
    gpu_copy_rows(outer_, width, x + offset, bottom_width, top[t]->mutable_gpu_data(), width);
    offset += width;
  }
}

template <typename Dtype>
void SliceLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  Dtype* dx = bottom[0]->mutable_gpu_diff();
  const int bottom_width = bottom[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t t = 0; t < top.size(); ++t) {
    const int width = sizes_[t] * inner_;
    gpu_copy_rows(outer_, width, top[t]->gpu_diff(), width, dx + offset, bottom_width);
    offset += width;
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SliceLayer);

}  // namespace strata
