#include <type_traits>

#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/lrn_layer.hpp"

namespace strata {

namespace {

// One thread per value, summing its own window directly (n = 5 channels, or an n x n patch, is a handful of
// reads that neighbouring threads share through the cache); the running sums of the CPU version would serialise
// a thread over a whole channel fibre for no gain here.
//   ACROSS: scale = k + alpha/n * sum of x^2 over channels [c - pre, c + pre] (clipped)
//   WITHIN: scale = 1 + alpha/(n*n) * sum of x^2 over the n x n patch (zero outside the image)
// T: how x, y and the gradients are stored (Dtype, or bfloat16 with float arithmetic); scale stays in Dtype, in
// the same order. `last`: channels-last (ImageLayout's rule), a channel's neighbours then adjacent and a plane's
// pixels C apart.
struct LrnOrder {
  long long C, H, W;
  bool last;
  __device__ long long channel_stride() const { return last ? 1 : H * W; }
  __device__ long long pixel_stride() const { return last ? C : 1; }
  __device__ int channel(long long i) const { return static_cast<int>(last ? i % C : (i / (H * W)) % C); }
  __device__ long long pixel(long long i) const { return last ? (i / C) % (H * W) : i % (H * W); }
};

template <typename T, typename Dtype = ComputeType<T>>
__global__ void lrn_forward(long long count, const T* x, LrnOrder o, int size, Dtype alpha, Dtype beta, Dtype k,
                            bool across, Dtype* scale, T* y) {
  const int pre = (size - 1) / 2;
  const int C = static_cast<int>(o.C), H = static_cast<int>(o.H), W = static_cast<int>(o.W);
  const long long cs = o.channel_stride(), ps = o.pixel_stride();
  STRATA_KERNEL_LOOP(i, count) {
    Dtype s = 0;
    if (across) {
      const int c = o.channel(i);
      const T* base = x + i - c * cs;
      for (int j = max(c - pre, 0); j <= min(c + pre, C - 1); ++j) {
        const Dtype v = value_of(base[j * cs]);
        s += v * v;
      }
      s = k + alpha / size * s;
    } else {
      const long long p = o.pixel(i);
      const int w = p % W, h = p / W;
      const T* plane = x + i - p * ps;
      for (int a = max(h - pre, 0); a <= min(h + pre, H - 1); ++a) {
        for (int b = max(w - pre, 0); b <= min(w + pre, W - 1); ++b) {
          const Dtype v = value_of(plane[(static_cast<long long>(a) * W + b) * ps]);
          s += v * v;
        }
      }
      s = Dtype(1) + alpha * (s / Dtype(size * size));
    }
    scale[i] = s;
    put(&y[i], value_of(x[i]) * pow(s, -beta));
  }
}

// dx = dy * scale^-beta - coef * x * (window sum of dy * y / scale); the window is the same as forward's.
template <typename T, typename Dtype = ComputeType<T>>
__global__ void lrn_backward(long long count, const T* x, const T* y, const T* dy, const Dtype* scale, LrnOrder o,
                             int size, Dtype coef, Dtype beta, bool across, T* dx) {
  const int pre = (size - 1) / 2;
  const int C = static_cast<int>(o.C), H = static_cast<int>(o.H), W = static_cast<int>(o.W);
  const long long cs = o.channel_stride(), ps = o.pixel_stride();
  STRATA_KERNEL_LOOP(i, count) {
    Dtype r = 0;
    if (across) {
      const int c = o.channel(i);
      const long long first = i - c * cs;
      for (int j = max(c - pre, 0); j <= min(c + pre, C - 1); ++j) {
        const long long q = first + j * cs;
        r += value_of(dy[q]) * value_of(y[q]) / scale[q];
      }
    } else {
      const long long p = o.pixel(i);
      const int w = p % W, h = p / W;
      const long long first = i - p * ps;
      for (int a = max(h - pre, 0); a <= min(h + pre, H - 1); ++a) {
        for (int b = max(w - pre, 0); b <= min(w + pre, W - 1); ++b) {
          const long long q = first + (static_cast<long long>(a) * W + b) * ps;
          r += value_of(dy[q]) * value_of(y[q]) / scale[q];
        }
      }
    }
    put(&dx[i], value_of(dy[i]) * pow(scale[i], -beta) - coef * value_of(x[i]) * r);
  }
}

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  // bfloat16 follows the bottom's order (bf16_device.cuh); scale_ is kept in it.
  const DeviceFormat f = ComputesInBf16() ? bf16_format_following(*bottom[0]) : DeviceFormat::kPlain;
  gpu_format_ = f;
  const LrnOrder order{channels_, height_, width_, f == DeviceFormat::kBf16Nhwc};
  with_storage<Dtype>(is_bf16(f), [&](auto stored) {
    using T = decltype(stored);
    lrn_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0], f), order, size_, alpha_, beta_,
                                                     k_, across_, scale_.mutable_gpu_data(),
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
  const LrnOrder order{channels_, height_, width_, f == DeviceFormat::kBf16Nhwc};
  with_storage<Dtype>(is_bf16(f), [&](auto stored) {
    using T = decltype(stored);
    lrn_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, gpu_data_as<T>(*bottom[0], f), gpu_data_as<T>(*top[0], f),
                                                      gpu_diff_as<T>(*top[0], f), scale_.gpu_data(), order, size_,
                                                      coef, beta_, across_,
                                                      mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(LRNLayer);

}  // namespace strata
