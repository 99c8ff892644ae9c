#include <cfloat>

#include "device_storage.cuh"
#include "counter_rng.hpp"
#include "pool_order.hpp"
#include "stochastic_pool.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/pooling_layer.hpp"

namespace strata {

namespace {

// One thread per output (pool_order.hpp: MAX and AVE in either order, as the host tests check them). T: how x and
// y are stored (Dtype, or a 16-bit type for a float layer computing in it, with float arithmetic); `last`: channels-last,
// C channels.
template <typename T, typename Dtype, typename Window>
__global__ void pool_forward(long long n, const T* x, Window w, int C, bool last, bool max_pool, T* y, int* mask,
                             Dtype* mask_top) {
  STRATA_KERNEL_LOOP(k, n) pool_order::Forward(k, x, w, C, last, max_pool, y, mask, mask_top);
}

// One thread per input.
template <typename T, typename Window>
__global__ void pool_backward(long long n, const T* dy, Window w, int C, bool last, bool max_pool, const int* mask,
                              T* dx) {
  STRATA_KERNEL_LOOP(k, n) pool_order::Backward(k, dy, w, C, last, max_pool, mask, dx);
}

// STOCHASTIC pooling, one thread per output, with the CPU's per-window functions (stochastic_pool.hpp): TRAIN
// draws output k's uniform as the k-th value of the stream `seed`, so the pick equals the CPU's.
template <typename Dtype, typename Window>
__global__ void stochastic_forward(long long n, const Dtype* x, Window w, bool train, uint64_t seed, Dtype* y,
                                   int* mask) {
  STRATA_KERNEL_LOOP(k, n) {
    const int pw = k % w.pooled_w;
    const int ph = (k / w.pooled_w) % w.pooled_h;
    const long long c = k / (static_cast<long long>(w.pooled_w) * w.pooled_h);
    const Dtype* xc = x + c * w.height * w.width;
    const int h0 = ph * w.stride_h, h1 = min(h0 + w.kernel_h, w.height);
    const int w0 = pw * w.stride_w, w1 = min(w0 + w.kernel_w, w.width);
    if (train) {
      mask[k] = stochastic_pool::Pick(xc, w.width, h0, h1, w0, w1, counter_rng::uniform(seed, k), &y[k]);
    } else {
      Dtype sum;
      y[k] = stochastic_pool::WeightedMean(xc, w.width, h0, h1, w0, w1, &sum);
    }
  }
}

// TEST STOCHASTIC pooling's backward, one thread per input: it gathers from the windows that cover it, each
// window's mean and sum recomputed (no atomics, the CPU's order).
template <typename Dtype, typename Window>
__global__ void weighted_mean_backward(long long n, const Dtype* x, const Dtype* dy, Window w, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const int iw = k % w.width;
    const int ih = (k / w.width) % w.height;
    const long long c = k / (static_cast<long long>(w.width) * w.height);
    const Dtype* xc = x + c * w.height * w.width;
    const int ph0 = ih < w.kernel_h ? 0 : (ih - w.kernel_h) / w.stride_h + 1;
    const int ph1 = min(ih / w.stride_h + 1, w.pooled_h);
    const int pw0 = iw < w.kernel_w ? 0 : (iw - w.kernel_w) / w.stride_w + 1;
    const int pw1 = min(iw / w.stride_w + 1, w.pooled_w);
    Dtype g = 0;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        const int h0 = ph * w.stride_h, w0 = pw * w.stride_w;
        Dtype sum;
        const Dtype y = stochastic_pool::WeightedMean(xc, w.width, h0, min(h0 + w.kernel_h, w.height), w0,
                                                      min(w0 + w.kernel_w, w.width), &sum);
        g += dy[(c * w.pooled_h + ph) * w.pooled_w + pw] * stochastic_pool::WeightedMeanGradient(x[k], y, sum);
      }
    }
    dx[k] = g;
  }
}

}  // namespace

template <typename Dtype>
void PoolingLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (stochastic()) {
    const bool train = this->phase_ == TRAIN;
    const uint64_t seed = train ? Strata::draw_seed() : 0;  // drawn even for an empty blob, as on the CPU
    if (n == 0) return;
    stochastic_forward<<<cuda::blocks(n), cuda::kThreads>>>(
        n, bottom[0]->gpu_data(), win_, train, seed, top[0]->mutable_gpu_data(),
        train ? reinterpret_cast<int*>(mask_.mutable_gpu_data()) : nullptr);
    STRATA_CUDA_KERNEL_CHECK();
    return;
  }
  if (n == 0) return;
  int* mask = max_ ? reinterpret_cast<int*>(mask_.mutable_gpu_data()) : nullptr;
  Dtype* mask_top = max_ && top.size() > 1 ? top[1]->mutable_gpu_data() : nullptr;
  // In the bottom's order (device_storage.cuh).
  const DeviceFormat f = format_following(*bottom[0], this->GpuStorage());
  const bool last = is_channels_last(f);
  gpu_format_ = f;
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    pool_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0], f), win_, bottom[0]->shape(1),
                                                      last, max_,
                                                      mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f),
                                                      mask, mask_top);
  });
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void PoolingLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  if (stochastic() && !keeps_index_) {
    weighted_mean_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[0]->gpu_data(), top[0]->gpu_diff(), win_,
                                                                bottom[0]->mutable_gpu_diff());
    STRATA_CUDA_KERNEL_CHECK();
    return;
  }
  // MAX and TRAIN STOCHASTIC route each output's gradient to its kept index.
  const int* mask = keeps_index_ ? reinterpret_cast<const int*>(mask_.gpu_data()) : nullptr;
  // In forward's order, the mask's (the top may have been converted since, by a reader in another).
  const DeviceFormat f = gpu_format_;
  const bool last = is_channels_last(f);
  with_storage<Dtype>(element_type_of(f), [&](auto stored) {
    using T = decltype(stored);
    pool_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_diff_as<T>(*top[0], f), win_, bottom[0]->shape(1),
                                                       last, keeps_index_, mask,
                                                       mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(PoolingLayer);

}  // namespace strata
