#include <cstdint>

#include "device_storage.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/dropout_layer.hpp"
#include "counter_rng.hpp"

namespace strata {

namespace {

// The CPU's counter-based mask (dropout_layer.cpp): values 2j and 2j+1 take the low and high halves of the j-th
// draw, so the GPU draws exactly the CPU's mask for the same seed.
// T: how the values are stored (Dtype, or a 16-bit type with float arithmetic).
template <typename T>
__global__ void dropout_forward(long long pairs, long long n, const T* x, T* y, uint8_t* mask, uint64_t seed,
                                uint64_t keep_below, ComputeType<T> scale) {
  using Dtype = ComputeType<T>;
  STRATA_KERNEL_LOOP(j, pairs) {
    const uint64_t z = counter_rng::draw(seed, static_cast<uint64_t>(j));
    const uint8_t m0 = (z & 0xFFFFFFFFull) < keep_below;
    const uint8_t m1 = (z >> 32) < keep_below;
    mask[2 * j] = m0;
    mask[2 * j + 1] = m1;
    put(&y[2 * j], value_of(x[2 * j]) * (Dtype(m0) * scale));
    if (2 * j + 1 < n) put(&y[2 * j + 1], value_of(x[2 * j + 1]) * (Dtype(m1) * scale));
  }
}

template <typename T>
__global__ void dropout_backward(long long n, const T* dy, const uint8_t* mask, T* dx, ComputeType<T> scale) {
  STRATA_KERNEL_LOOP(i, n) put(&dx[i], value_of(dy[i]) * (ComputeType<T>(mask[i]) * scale));
}

}  // namespace

template <typename Dtype>
void DropoutLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  // Drawn even for an empty blob, as the CPU does, so both keep the same random stream.
  const uint64_t seed = this->phase_ == TRAIN ? Strata::draw_seed() : 0;
  if (this->phase_ == TRAIN && n == 0) return;
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
    using T = decltype(stored);
    const T* x = gpu_data_as<T>(*bottom[0]);  // before the top's pointer: they may be one blob
    T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false);
    if (this->phase_ != TRAIN) {
      if (x != y) gpu_copy_rows_as(1, n, x, n, y, n);
      return;
    }
    const long long pairs = (n + 1) / 2;
    dropout_forward<<<cuda::blocks(pairs), cuda::kThreads>>>(pairs, static_cast<long long>(n), x, y,
                                                             reinterpret_cast<uint8_t*>(mask_.mutable_gpu_data()),
                                                             seed, keep_below_, static_cast<ComputeType<T>>(scale_));
    STRATA_CUDA_KERNEL_CHECK();
  });
}

template <typename Dtype>
void DropoutLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  if (this->phase_ == TRAIN && n == 0) return;
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
    using T = decltype(stored);
    const T* dy = gpu_diff_as<T>(*top[0]);  // in place, the same blob as dx: converted first
    T* dx = mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false);
    if (this->phase_ != TRAIN) {
      if (dx != dy) gpu_copy_rows_as(1, n, dy, n, dx, n);
      return;
    }
    dropout_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), dy,
                                                          reinterpret_cast<const uint8_t*>(mask_.gpu_data()), dx,
                                                          static_cast<ComputeType<T>>(scale_));
    STRATA_CUDA_KERNEL_CHECK();
  });
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(DropoutLayer);

}  // namespace strata
