#include <type_traits>
#include <vector>

#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/split_layer.hpp"

namespace strata {

// Forward shares the bottom's memory as on the CPU (no copy, on either side).
template <typename Dtype>
void SplitLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob<Dtype>* t : top) t->ShareData(*bottom[0]);
}

template <typename Dtype>
void SplitLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = bottom[0]->count();
  if constexpr (std::is_same<Dtype, float>::value) {
    // A Split follows its consumers: their gradients in bfloat16 (layers computing in it) are summed in it, in the
    // order of the first (the others converted to it, where they differ).
    bool bf16 = true;
    for (Blob<Dtype>* t : top) bf16 = bf16 && is_bf16(t->diff_device_format());
    if (bf16) {
      const DeviceFormat f = top[0]->diff_device_format();
      std::vector<const bfloat16*> terms;
      for (Blob<Dtype>* t : top) terms.push_back(t->gpu_diff_bf16(f));
      return gpu_sum_bf16(n, terms, bottom[0]->mutable_gpu_diff_bf16(/*keep_values=*/false, f));
    }
  }
  Dtype* bottom_diff = bottom[0]->mutable_gpu_diff();
  if (top.size() == 1) {
    gpu_copy(n, top[0]->gpu_diff(), bottom_diff);
    return;
  }
  gpu_add(n, top[0]->gpu_diff(), top[1]->gpu_diff(), bottom_diff);
  for (size_t i = 2; i < top.size(); ++i) gpu_axpy(n, Dtype(1), top[i]->gpu_diff(), bottom_diff);
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SplitLayer);

}  // namespace strata
