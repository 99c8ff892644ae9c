#include "strata/cuda.hpp"
#include "strata/layers/batch_norm_layer.hpp"
#include "strata/layers/bias_layer.hpp"

#include "channel_reduce.cuh"

namespace strata {

namespace {

template <typename Dtype>
__global__ void bn_normalise(long long n, int C, int S, const Dtype* x, const Dtype* mean, const Dtype* inv_std,
                             Dtype* x_hat, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const int c = (k / S) % C;
    const Dtype v = (x[k] - mean[c]) * inv_std[c];
    x_hat[k] = v;
    y[k] = v;
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

// dx = (dy - mean(dy) - x_hat * mean(dy * x_hat)) / std; in place dx is dy, read and written per element.
template <typename Dtype>
__global__ void bn_backward(long long n, int C, int S, const Dtype* dy, const Dtype* x_hat, const Dtype* inv_std,
                            const Dtype* mean_dy, const Dtype* mean_dy_xhat, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const int c = (k / S) % C;
    dx[k] = inv_std[c] * (dy[k] - mean_dy[c] - x_hat[k] * mean_dy_xhat[c]);
  }
}

// TRAIN statistics per channel: the sums of d = x - x0 and d^2, shifted by the channel's first value x0
// against cancellation (the CPU's method), then the running sums (Caffe's unbiased variance). In place, x0 is
// still intact: the output is written by the next kernel. (Free functions: nvcc allows device lambdas only in
// functions with public access.)
template <typename Dtype>
void bn_statistics(int num, int C, int S, const Dtype* x, Dtype eps, Dtype maf, Dtype* mean, Dtype* variance,
                   Dtype* inv_std, Dtype* run_mean, Dtype* run_var, Dtype* factor) {
  const double m = static_cast<double>(num) * S;
  channel_reduce(
      num, C, S,
      [=] __device__(long long k, int c) {
        const double d = static_cast<double>(x[k] - x[static_cast<long long>(c) * S]);
        return make_double2(d, d * d);
      },
      [=] __device__(int c, double sum_d, double sum_d2) {
        const double mean_d = sum_d / m;
        const double var = max(0.0, sum_d2 / m - mean_d * mean_d);
        const Dtype mc = static_cast<Dtype>(x[static_cast<long long>(c) * S] + mean_d);
        mean[c] = mc;
        variance[c] = static_cast<Dtype>(var);
        inv_std[c] = static_cast<Dtype>(1.0 / sqrt(var + eps));
        const Dtype correction = m > 1 ? static_cast<Dtype>(m / (m - 1)) : Dtype(1);
        run_mean[c] = maf * run_mean[c] + mc;
        run_var[c] = maf * run_var[c] + correction * static_cast<Dtype>(var);
        if (c == 0) factor[0] = factor[0] * maf + 1;
      });
}

// mean(dy) and mean(dy * x_hat) per channel.
template <typename Dtype>
void bn_grad_means(int num, int C, int S, const Dtype* dy, const Dtype* x_hat, Dtype* mean_dy, Dtype* mean_dy_xhat) {
  const double m = static_cast<double>(num) * S;
  channel_reduce(
      num, C, S,
      [=] __device__(long long k, int) {
        return make_double2(static_cast<double>(dy[k]), static_cast<double>(dy[k] * x_hat[k]));
      },
      [=] __device__(int c, double sum_dy, double sum_dy_xhat) {
        mean_dy[c] = static_cast<Dtype>(sum_dy / m);
        mean_dy_xhat[c] = static_cast<Dtype>(sum_dy_xhat / m);
      });
}

}  // namespace

template <typename Dtype>
void BatchNormLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const int C = channels_, S = spatial_;
  const Dtype* x = bottom[0]->gpu_data();
  Dtype* y = top[0]->mutable_gpu_data();
  Dtype* mean = mean_.mutable_gpu_data();
  Dtype* variance = variance_.mutable_gpu_data();
  Dtype* inv_std = inv_std_.mutable_gpu_data();
  if (use_global_stats_) {
    bn_global<<<cuda::blocks(C), cuda::kThreads>>>(C, this->blobs_[0]->gpu_data(), this->blobs_[1]->gpu_data(),
                                                   this->blobs_[2]->gpu_data(), eps_, mean, inv_std, variance);
    STRATA_CUDA_KERNEL_CHECK();
    gpu_broadcast_affine<Dtype>(BroadcastGeometry{num_, C, S}, x, inv_std, variance, y);
    return;
  }
  bn_statistics(num_, C, S, x, eps_, moving_average_fraction_, mean, variance, inv_std,
                this->blobs_[0]->mutable_gpu_data(), this->blobs_[1]->mutable_gpu_data(),
                this->blobs_[2]->mutable_gpu_data());
  bn_normalise<<<cuda::blocks(n), cuda::kThreads>>>(n, C, S, x, mean, inv_std, x_hat_.mutable_gpu_data(), y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  const long long n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const int C = channels_, S = spatial_;
  const Dtype* dy = top[0]->gpu_diff();
  Dtype* dx = bottom[0]->mutable_gpu_diff();
  const Dtype* inv_std = inv_std_.gpu_data();
  if (use_global_stats_) {
    gpu_broadcast_affine<Dtype>(BroadcastGeometry{num_, C, S}, dy, inv_std, nullptr, dx);
    return;
  }
  Dtype* mean_dy = grad_mean_.mutable_gpu_data();
  bn_grad_means(num_, C, S, dy, x_hat_.gpu_data(), mean_dy, mean_dy + C);
  bn_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, C, S, dy, x_hat_.gpu_data(), inv_std, mean_dy, mean_dy + C,
                                                   dx);
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(BatchNormLayer);

}  // namespace strata
