#include <cstdint>

#include "strata/cuda.hpp"
#include "strata/layers/dropout_layer.hpp"
#include "counter_rng.hpp"

namespace strata {

namespace {

// The CPU's counter-based mask (dropout_layer.cpp): values 2j and 2j+1 take the low and high halves of the j-th
// draw, so the GPU draws exactly the CPU's mask for the same seed.
template <typename Dtype>
__global__ void dropout_forward(long long pairs, long long n, const Dtype* x, Dtype* y, uint8_t* mask,
                                uint64_t seed, uint64_t keep_below, Dtype scale) {
  STRATA_KERNEL_LOOP(j, pairs) {
    const uint64_t z = counter_rng::draw(seed, static_cast<uint64_t>(j));
    const uint8_t m0 = (z & 0xFFFFFFFFull) < keep_below;
    const uint8_t m1 = (z >> 32) < keep_below;
    mask[2 * j] = m0;
    mask[2 * j + 1] = m1;
    y[2 * j] = x[2 * j] * (Dtype(m0) * scale);
    if (2 * j + 1 < n) y[2 * j + 1] = x[2 * j + 1] * (Dtype(m1) * scale);
  }
}

template <typename Dtype>
__global__ void dropout_backward(long long n, const Dtype* dy, const uint8_t* mask, Dtype* dx, Dtype scale) {
  STRATA_KERNEL_LOOP(i, n) dx[i] = dy[i] * (Dtype(mask[i]) * scale);
}

}  // namespace

template <typename Dtype>
void DropoutLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (this->phase_ != TRAIN) {
    gpu_copy(n, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
    return;
  }
  // Drawn even for an empty blob, as the CPU does, so both keep the same random stream.
  const uint64_t seed = Strata::draw_seed();
  if (n == 0) return;
  const long long pairs = (n + 1) / 2;
  uint8_t* mask = reinterpret_cast<uint8_t*>(mask_.mutable_gpu_data());
  dropout_forward<<<cuda::blocks(pairs), cuda::kThreads>>>(pairs, static_cast<long long>(n), bottom[0]->gpu_data(),
                                                           top[0]->mutable_gpu_data(), mask, seed, keep_below_,
                                                           scale_);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void DropoutLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  if (this->phase_ != TRAIN) {
    gpu_copy(n, top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff());
    return;
  }
  if (n == 0) return;
  dropout_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), top[0]->gpu_diff(),
                                                        reinterpret_cast<const uint8_t*>(mask_.gpu_data()),
                                                        bottom[0]->mutable_gpu_diff(), scale_);
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(DropoutLayer);

}  // namespace strata
