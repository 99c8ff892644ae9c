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
  // A Split follows its consumers: their gradients are summed in the order of the first (the others converted to
  // it, where they differ), and in bfloat16 when all of them are (layers computing in it).
  const bool last = std::is_same<Dtype, float>::value && is_channels_last(top[0]->diff_device_format());
  if constexpr (std::is_same<Dtype, float>::value) {
    bool bf16 = true;
    for (Blob<Dtype>* t : top) bf16 = bf16 && is_bf16(t->diff_device_format());
    if (bf16) {
      const DeviceFormat f = device_format_for(/*bf16=*/true, last);
      std::vector<const bfloat16*> terms;
      for (Blob<Dtype>* t : top) terms.push_back(t->gpu_diff_bf16(f));
      return gpu_sum_bf16(n, terms, bottom[0]->mutable_gpu_diff_bf16(/*keep_values=*/false, f));
    }
  }
  const DeviceFormat f = device_format_for(/*bf16=*/false, last);
  Dtype* bottom_diff = bottom[0]->mutable_gpu_diff_in(f, /*keep_values=*/false);
  if (top.size() == 1) {
    gpu_copy(n, top[0]->gpu_diff_in(f), bottom_diff);
    return;
  }
  gpu_add(n, top[0]->gpu_diff_in(f), top[1]->gpu_diff_in(f), bottom_diff);
  for (size_t i = 2; i < top.size(); ++i) gpu_axpy(n, Dtype(1), top[i]->gpu_diff_in(f), bottom_diff);
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SplitLayer);

}  // namespace strata
