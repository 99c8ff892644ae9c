#include <type_traits>
#include <vector>

#include "device_storage.cuh"
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
  // it, where they differ), and in 16 bits when all of them are in one 16-bit type (layers computing in it).
  const bool last = std::is_same<Dtype, float>::value && is_channels_last(top[0]->diff_device_format());
  if constexpr (std::is_same<Dtype, float>::value) {
    const ElementType type = element_type_of(top[0]->diff_device_format());
    bool alike = type != ElementType::kOwn;
    for (Blob<Dtype>* t : top) alike = alike && element_type_of(t->diff_device_format()) == type;
    if (alike) {
      const DeviceFormat f = device_format_for(type, last);
      return with_storage<Dtype>(type, [&](auto stored) {
        using T = decltype(stored);
        if constexpr (is_16bit_type<T>) {
          std::vector<const T*> terms;
          for (Blob<Dtype>* t : top) terms.push_back(gpu_diff_as<T>(*t, f));
          gpu_sum_16bit(n, terms, mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f));
        }
      });
    }
  }
  const DeviceFormat f = device_format_for(ElementType::kOwn, last);
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
