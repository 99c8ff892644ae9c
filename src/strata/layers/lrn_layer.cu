#include <type_traits>

#include "device_storage.cuh"
#include "lrn_window.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/lrn_layer.hpp"

namespace strata {

namespace {

// One thread per value (lrn_window.hpp: either order, as the host test checks it).
template <typename T, typename Dtype>
__global__ void lrn_forward(long long count, const T* x, lrn_window::Window w, Dtype alpha, Dtype beta, Dtype k,
                            Dtype* scale, T* y) {
  STRATA_KERNEL_LOOP(i, count) lrn_window::Forward(i, x, w, alpha, beta, k, scale, y);
}

template <typename T, typename Dtype>
__global__ void lrn_backward(long long count, const T* x, const T* y, const T* dy, const Dtype* scale,
                             lrn_window::Window w, Dtype coef, Dtype beta, T* dx) {
  STRATA_KERNEL_LOOP(i, count) lrn_window::Backward(i, x, y, dy, scale, w, coef, beta, dx);
}

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  // In the bottom's order (device_storage.cuh); scale_ is kept in it.
  const DeviceFormat f = format_following(*bottom[0], this->GpuStorage());
  gpu_format_ = f;
  const lrn_window::Window w{image_layout(*bottom[0], f), width_, size_, across_};
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    lrn_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0], f), w, alpha_, beta_, k_,
                                                     scale_.mutable_gpu_data(),
                                                     mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void LRNLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const Dtype coef = Dtype(2) * alpha_ * beta_ / (across_ ? Dtype(size_) : Dtype(size_ * size_));
  const DeviceFormat f = gpu_format_;  // forward's: scale_'s order
  const lrn_window::Window w{image_layout(*bottom[0], f), width_, size_, across_};
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    lrn_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0], f), gpu_data_as<T>(*top[0], f),
                                                      gpu_diff_as<T>(*top[0], f), scale_.gpu_data(), w, coef, beta_,
                                                      mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(LRNLayer);

}  // namespace strata
