#include <cfloat>

#include "bf16_device.cuh"
#include "counter_rng.hpp"
#include "stochastic_pool.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/pooling_layer.hpp"

namespace strata {

namespace {

// One thread per output. MAX scans its window in row-major order with a strict >, so of equal maxima the first
// (smallest index) wins, as on the CPU; an empty window gives -FLT_MAX and index -1. AVE divides by Caffe's
// window size: the window clipped to the padded image, never below 1. T: how x and y are stored (Dtype, or
// bfloat16 for a float layer computing in it, with float arithmetic).
template <typename T, typename Dtype, typename Window>
__global__ void pool_forward(long long n, const T* x, Window w, bool max_pool, T* y, int* mask, Dtype* mask_top) {
  using C = ComputeType<T>;
  STRATA_KERNEL_LOOP(k, n) {
    const int pw = k % w.pooled_w;
    const int ph = (k / w.pooled_w) % w.pooled_h;
    const long long c = k / (static_cast<long long>(w.pooled_w) * w.pooled_h);
    const T* xc = x + c * w.height * w.width;
    const int hs = ph * w.stride_h - w.pad_h, ws = pw * w.stride_w - w.pad_w;
    const int h0 = max(hs, 0), w0 = max(ws, 0);
    const int h1 = min(hs + w.kernel_h, w.height), w1 = min(ws + w.kernel_w, w.width);
    if (max_pool) {
      C best = -FLT_MAX;
      int arg = -1;
      for (int h = h0; h < h1; ++h) {
        for (int x_w = w0; x_w < w1; ++x_w) {
          const C v = value_of(xc[h * w.width + x_w]);
          if (v > best) {
            best = v;
            arg = h * w.width + x_w;
          }
        }
      }
      put(&y[k], best);
      mask[k] = arg;
      if (mask_top) mask_top[k] = Dtype(arg);
    } else {
      C sum = 0;
      for (int h = h0; h < h1; ++h)
        for (int x_w = w0; x_w < w1; ++x_w) sum += value_of(xc[h * w.width + x_w]);
      const int rows = min(hs + w.kernel_h, w.height + w.pad_h) - hs;
      const int cols = min(ws + w.kernel_w, w.width + w.pad_w) - ws;
      put(&y[k], sum / C(max(rows * cols, 1)));
    }
  }
}

// One thread per input: it gathers from the outputs whose windows cover it (no atomics, so deterministic), in
// the CPU's order (output rows, then columns, ascending).
template <typename T, typename Window>
__global__ void pool_backward(long long n, const T* dy, Window w, bool max_pool, const int* mask, T* dx) {
  using C = ComputeType<T>;
  STRATA_KERNEL_LOOP(k, n) {
    const int iw = k % w.width;
    const int ih = (k / w.width) % w.height;
    const long long c = k / (static_cast<long long>(w.width) * w.height);
    const int index = ih * w.width + iw;
    // Outputs ph with ph*stride - pad <= ih < ph*stride - pad + kernel.
    const int ph0 = ih + w.pad_h < w.kernel_h ? 0 : (ih + w.pad_h - w.kernel_h) / w.stride_h + 1;
    const int ph1 = min((ih + w.pad_h) / w.stride_h + 1, w.pooled_h);
    const int pw0 = iw + w.pad_w < w.kernel_w ? 0 : (iw + w.pad_w - w.kernel_w) / w.stride_w + 1;
    const int pw1 = min((iw + w.pad_w) / w.stride_w + 1, w.pooled_w);
    const long long out0 = c * w.pooled_h * w.pooled_w;
    C g = 0;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        const long long o = out0 + ph * w.pooled_w + pw;
        if (max_pool) {
          if (mask[o] == index) g += value_of(dy[o]);
        } else {
          const int hs = ph * w.stride_h - w.pad_h, ws = pw * w.stride_w - w.pad_w;
          const int rows = min(hs + w.kernel_h, w.height + w.pad_h) - hs;
          const int cols = min(ws + w.kernel_w, w.width + w.pad_w) - ws;
          g += value_of(dy[o]) / C(max(rows * cols, 1));
        }
      }
    }
    put(&dx[k], g);
  }
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
  with_storage<Dtype>(ComputesInBf16(), [&](auto stored) {
    using T = decltype(stored);
    pool_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0]), win_, max_,
                                                      mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false), mask,
                                                      mask_top);
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
  with_storage<Dtype>(ComputesInBf16(), [&](auto stored) {
    using T = decltype(stored);
    pool_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_diff_as<T>(*top[0]), win_, keeps_index_, mask,
                                                       mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(PoolingLayer);

}  // namespace strata
