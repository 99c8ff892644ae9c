#include <cstdint>

#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/dropout_layer.hpp"
#include "counter_rng.hpp"

namespace strata {

namespace {

// The CPU's counter-based mask (dropout_layer.cpp): values 2j and 2j+1 take the low and high halves of the j-th
// draw, so the GPU draws exactly the CPU's mask for the same seed.
// T: how the values are stored (Dtype, or bfloat16 with float arithmetic).
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
  const bool bf16 = ComputesInBf16();
  if (this->phase_ != TRAIN) {
    if (bf16) {
      const bfloat16* x = bottom[0]->gpu_data_bf16();
      bfloat16* y = top[0]->mutable_gpu_data_bf16(/*keep_values=*/false);
      if (x != y) gpu_copy_rows_bf16(1, n, x, n, y, n);
    } else {
      gpu_copy(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
    }
    return;
  }
  // Drawn even for an empty blob, as the CPU does, so both keep the same random stream.
  const uint64_t seed = Strata::draw_seed();
  if (n == 0) return;
  const long long pairs = (n + 1) / 2;
  uint8_t* mask = reinterpret_cast<uint8_t*>(mask_.mutable_gpu_data());
  if (bf16) {
    const bfloat16* x = bottom[0]->gpu_data_bf16();  // before the top's pointer: they may be one blob
    dropout_forward<<<cuda::blocks(pairs), cuda::kThreads>>>(pairs, static_cast<long long>(n), x,
                                                             top[0]->mutable_gpu_data_bf16(false), mask, seed,
                                                             keep_below_, static_cast<float>(scale_));
  } else {
    dropout_forward<<<cuda::blocks(pairs), cuda::kThreads>>>(pairs, static_cast<long long>(n),
                                                             bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), mask,
                                                             seed, keep_below_, scale_);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void DropoutLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  const bool bf16 = ComputesInBf16();
  if (this->phase_ != TRAIN) {
    if (bf16) {
      const bfloat16* dy = top[0]->gpu_diff_bf16();
      bfloat16* dx = bottom[0]->mutable_gpu_diff_bf16(/*keep_values=*/false);
      if (dx != dy) gpu_copy_rows_bf16(1, n, dy, n, dx, n);
    } else {
      gpu_copy(n, top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
    }
    return;
  }
  if (n == 0) return;
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(mask_.gpu_data());
  if (bf16) {
    const bfloat16* dy = top[0]->gpu_diff_bf16();  // in place, the same blob as dx: converted first
    dropout_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), dy, mask,
                                                          bottom[0]->mutable_gpu_diff_bf16(false),
                                                          static_cast<float>(scale_));
  } else {
    dropout_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), top[0]->gpu_diff(), mask,
                                                          bottom[0]->mutable_gpu_diff(), scale_);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(DropoutLayer);

}  // namespace strata
