#include "strata/cuda.hpp"
#include "strata/layers/batch_norm_layer.hpp"
#include "strata/layers/bias_layer.hpp"

#include <type_traits>

#include "device_storage.cuh"
#include "channel_reduce.cuh"
#include "relu_device.cuh"

namespace strata {

namespace {

// What follows the normalisation: nothing, or an absorbed Scale (gamma, and beta unless it has no bias) and
// maybe a ReLU after it (Layer::Absorb), computed as their own forwards and backwards compute them.
template <typename Dtype>
struct BnPost {
  const Dtype* gamma = nullptr;  // null: no absorbed Scale
  const Dtype* beta = nullptr;   // null: no bias
  bool relu = false;
  Dtype slope = 0;

  __device__ Dtype affine(Dtype v, int c) const {
    if (!gamma) return v;
    return beta ? v * gamma[c] + beta[c] : v * gamma[c];
  }
  __device__ Dtype operator()(Dtype v, int c) const {
    const Dtype z = affine(v, c);
    return relu ? relu_value(z, slope) : z;
  }
  // d post / d z for the gradient of the Scale's output (the ReLU's factor; NaN gets 0, as in ReLU).
  __device__ Dtype relu_factor(Dtype v, int c) const {
    return relu ? relu_gradient_factor(affine(v, c), slope) : Dtype(1);
  }
  __device__ Dtype gamma_of(int c) const { return gamma ? gamma[c] : Dtype(1); }
};

// Element k's channel, in 32-bit arithmetic where the blob allows (64-bit division costs several times more), with
// the channels innermost when `last` (channels-last: ImageLayout's rule).
template <typename Index>
__device__ __forceinline__ int channel_of(Index k, int C, int S, bool last) {
  return static_cast<int>(last ? k % static_cast<Index>(C) : (k / static_cast<Index>(S)) % static_cast<Index>(C));
}

// T: how x, y, x_hat and the gradients are stored (Dtype, or a 16-bit type with float arithmetic: ComputeType).
template <typename T, typename Index>
__global__ void bn_normalise(Index n, int C, int S, bool last, const T* x, const ComputeType<T>* mean,
                             const ComputeType<T>* inv_std, BnPost<ComputeType<T>> post, T* x_hat, T* y) {
  for (Index k = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<Index>(blockDim.x) * gridDim.x) {
    const int c = channel_of(k, C, S, last);
    const ComputeType<T> v = (value_of(x[k]) - mean[c]) * inv_std[c];
    put(&x_hat[k], v);
    put(&y[k], post(v, c));
  }
}

// y = x * scale[c] + shift[c] (shift may be null): use_global_stats's forward and backward in 16 bits or
// channels-last (plain blobs in their own type use gpu_broadcast_affine).
template <typename T, typename Index>
__global__ void bn_affine(Index n, int C, int S, bool last, const T* x, const ComputeType<T>* scale,
                          const ComputeType<T>* shift, T* y) {
  for (Index k = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<Index>(blockDim.x) * gridDim.x) {
    const int c = channel_of(k, C, S, last);
    put(&y[k], value_of(x[k]) * scale[c] + (shift ? shift[c] : ComputeType<T>(0)));
  }
}


// use_global_stats: y = x * (1/std) + (-mean/std), the shift kept in variance (as on the CPU).
template <typename Dtype>
__global__ void bn_global(int C, const Dtype* run_mean, const Dtype* run_var, const Dtype* factor, Dtype eps,
                          Dtype* mean, Dtype* inv_std, Dtype* shift) {
  STRATA_KERNEL_LOOP(c, C) {
    const Dtype norm = factor[0] == 0 ? Dtype(0) : Dtype(1) / factor[0];
    mean[c] = run_mean[c] * norm;
    inv_std[c] = Dtype(1) / sqrt(run_var[c] * norm + eps);
    shift[c] = -mean[c] * inv_std[c];
  }
}

// dx = (g' - mean(g') - x_hat * mean(g' * x_hat)) / std, g' = gamma * g and g the gradient of the Scale's output
// (dy through the ReLU), or g' = dy alone; the two means come in mean_g and mean_g_xhat. In place dx is dy, read
// and written per element.
template <typename T, typename Index>
__global__ void bn_backward(Index n, int C, int S, bool last, const T* dy, const T* x_hat,
                            const ComputeType<T>* inv_std, BnPost<ComputeType<T>> post, const ComputeType<T>* mean_g,
                            const ComputeType<T>* mean_g_xhat, T* dx) {
  using Dtype = ComputeType<T>;
  for (Index k = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<Index>(blockDim.x) * gridDim.x) {
    const int c = channel_of(k, C, S, last);
    const Dtype v = value_of(x_hat[k]);
    const Dtype g = post.gamma_of(c) * (value_of(dy[k]) * post.relu_factor(v, c));
    put(&dx[k], inv_std[c] * (g - mean_g[c] - v * mean_g_xhat[c]));
  }
}

// Launches an element-wise kernel over n values with a 32-bit index where n leaves room for the grid's stride.
template <typename Launch>
void launch_indexed(long long n, const Launch& launch) {
  if (n < (1LL << 30)) {
    launch(static_cast<unsigned>(n));
  } else {
    launch(n);
  }
}

// use_global_stats's y = x * scale + shift per channel (shift may be null), in x's format.
template <typename T, typename Dtype>
void bn_global_affine(long long n, int num, int C, int S, bool last, const T* x, const Dtype* scale,
                      const Dtype* shift, T* y) {
  if constexpr (std::is_same<T, Dtype>::value) {
    if (!last) return gpu_broadcast_affine<Dtype>(BroadcastGeometry{num, C, S}, x, scale, shift, y);
  }
  launch_indexed(n, [&](auto count) {
    bn_affine<<<cuda::blocks(n), cuda::kThreads>>>(count, C, S, last, x, scale, shift, y);
  });
  STRATA_CUDA_KERNEL_CHECK();
}

// TRAIN statistics per channel: the sums of d = x - x0 and d^2, shifted by the channel's first value x0 (image 0,
// position 0) against cancellation (the CPU's method), then the running sums (Caffe's unbiased variance). In place,
// x0 is still intact: the output is written by the next kernel. (Free functions: nvcc allows device lambdas only
// in functions with public access.)
template <typename T, typename Dtype>
void bn_statistics(int num, int C, int S, bool last, const T* x, Dtype eps, Dtype maf, Dtype* mean,
                   Dtype* variance, Dtype* inv_std, Dtype* run_mean, Dtype* run_var, Dtype* factor) {
  const double m = static_cast<double>(num) * S;
  const long long first_stride = last ? 1 : S;  // x0 of channel c at c * first_stride
  // Channels-last, the blob is num x S rows of C channels.
  channel_reduce(
      last ? num * S : num, C, last ? 1 : S,
      [=] __device__(long long k, int c) {
        const double d = static_cast<double>(value_of(x[k]) - value_of(x[c * first_stride]));
        return make_double2(d, d * d);
      },
      [=] __device__(int c, double sum_d, double sum_d2) {
        const double mean_d = sum_d / m;
        const double var = max(0.0, sum_d2 / m - mean_d * mean_d);
        const Dtype mc = static_cast<Dtype>(value_of(x[c * first_stride]) + mean_d);
        mean[c] = mc;
        variance[c] = static_cast<Dtype>(var);
        inv_std[c] = static_cast<Dtype>(1.0 / sqrt(var + eps));
        const Dtype correction = m > 1 ? static_cast<Dtype>(m / (m - 1)) : Dtype(1);
        run_mean[c] = maf * run_mean[c] + mc;
        run_var[c] = maf * run_var[c] + correction * static_cast<Dtype>(var);
        if (c == 0) factor[0] = factor[0] * maf + 1;
      });
}

// The backward's per-channel sums of g and g * x_hat (g as in bn_backward): the absorbed Scale's gradients
// accumulate them (d gamma += sum(g * x_hat), d beta += sum(g), as its backward would), and mean_g, mean_g_xhat
// get gamma times their means.
template <typename T, typename Dtype>
void bn_grad_means(int num, int C, int S, bool last, const T* dy, const T* x_hat, BnPost<Dtype> post,
                   Dtype* dgamma, Dtype* dbeta, Dtype* mean_g, Dtype* mean_g_xhat) {
  const double m = static_cast<double>(num) * S;
  channel_reduce(
      last ? num * S : num, C, last ? 1 : S,
      [=] __device__(long long k, int c) {
        const Dtype v = value_of(x_hat[k]);
        const double g = static_cast<double>(value_of(dy[k]) * post.relu_factor(v, c));
        return make_double2(g, g * static_cast<double>(v));
      },
      [=] __device__(int c, double sum_g, double sum_g_xhat) {
        if (dgamma) dgamma[c] = static_cast<Dtype>(dgamma[c] + sum_g_xhat);
        if (dbeta) dbeta[c] = static_cast<Dtype>(dbeta[c] + sum_g);
        const double gamma = static_cast<double>(post.gamma_of(c));
        mean_g[c] = static_cast<Dtype>(gamma * sum_g / m);
        mean_g_xhat[c] = static_cast<Dtype>(gamma * sum_g_xhat / m);
      });
}

// The absorbed layers' part on the device (no Scale: the normalisation alone).
template <typename Dtype>
BnPost<Dtype> device_post(ScaleLayer<Dtype>* scale, ReLULayer<Dtype>* relu) {
  BnPost<Dtype> post;
  if (!scale) return post;
  post.gamma = scale->blobs()[0]->gpu_data();
  post.beta = scale->blobs().size() > 1 ? scale->blobs()[1]->gpu_data() : nullptr;
  post.relu = relu != nullptr;
  post.slope = relu ? relu->negative_slope() : Dtype(0);
  return post;
}

}  // namespace

template <typename Dtype>
void BatchNormLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) { ForwardGpuAs<decltype(stored)>(bottom, top); });
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
    BackwardGpuAs<decltype(stored)>(top, propagate_down, bottom);
  });
}

template <typename Dtype>
template <typename T>
void BatchNormLayer<Dtype>::ForwardGpuAs(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const int C = channels_, S = spatial_;
  // In the bottom's order (device_storage.cuh), x_hat kept in it.
  const DeviceFormat f = format_following(*bottom[0], element_type_as<T>());
  gpu_format_ = f;
  const bool last = is_channels_last(f);
  const T* x = gpu_data_as<T>(*bottom[0], f);
  T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f);  // in place, x: read before it is written
  Dtype* mean = mean_.mutable_gpu_data();
  Dtype* variance = variance_.mutable_gpu_data();
  Dtype* inv_std = inv_std_.mutable_gpu_data();
  if (use_global_stats_) {
    bn_global<<<cuda::blocks(C), cuda::kThreads>>>(C, this->blobs_[0]->gpu_data(), this->blobs_[1]->gpu_data(),
                                                   this->blobs_[2]->gpu_data(), eps_, mean, inv_std, variance);
    STRATA_CUDA_KERNEL_CHECK();
    return bn_global_affine(n, num_, C, S, last, x, inv_std, variance, y);
  }
  bn_statistics(num_, C, S, last, x, eps_, moving_average_fraction_, mean, variance, inv_std,
                this->blobs_[0]->mutable_gpu_data(), this->blobs_[1]->mutable_gpu_data(),
                this->blobs_[2]->mutable_gpu_data());
  const BnPost<Dtype> post = device_post(scale_, relu_);
  T* x_hat = mutable_gpu_data_as<T>(x_hat_, /*keep_values=*/false, f);
  launch_indexed(n, [&](auto count) {
    bn_normalise<<<cuda::blocks(n), cuda::kThreads>>>(count, C, S, last, x, mean, inv_std, post, x_hat, y);
  });
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
template <typename T>
void BatchNormLayer<Dtype>::BackwardGpuAs(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  const long long n = bottom[0]->count();
  // With an absorbed Scale its parameter gradients are due even without the bottom's.
  if (n == 0 || (!propagate_down[0] && !scale_)) return;
  const int C = channels_, S = spatial_;
  // In forward's order: the top's value may have been freed (it is not read) or converted by a reader since.
  const DeviceFormat f = gpu_format_;
  const bool last = is_channels_last(f);
  const T* dy = gpu_diff_as<T>(*top[0], f);
  const Dtype* inv_std = inv_std_.gpu_data();
  if (use_global_stats_) {
    T* dx = mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f);
    return bn_global_affine(n, num_, C, S, last, dy, inv_std, static_cast<const Dtype*>(nullptr), dx);
  }
  const BnPost<Dtype> post = device_post(scale_, relu_);
  Dtype* dgamma = scale_ && scale_->param_propagate_down(0) ? scale_->blobs()[0]->mutable_gpu_diff() : nullptr;
  Dtype* dbeta = scale_ && scale_->blobs().size() > 1 && scale_->param_propagate_down(1)
                     ? scale_->blobs()[1]->mutable_gpu_diff() : nullptr;
  Dtype* mean_g = grad_mean_.mutable_gpu_data();
  const T* x_hat = gpu_data_as<T>(x_hat_, f);
  bn_grad_means(num_, C, S, last, dy, x_hat, post, dgamma, dbeta, mean_g, mean_g + C);
  if (!propagate_down[0]) return;
  launch_indexed(n, [&](auto count) {
    bn_backward<<<cuda::blocks(n), cuda::kThreads>>>(count, C, S, last, dy, x_hat, inv_std, post, mean_g,
                                                     mean_g + C,
                                                     mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(BatchNormLayer);

}  // namespace strata
