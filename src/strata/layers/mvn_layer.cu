#include <cmath>

#include "strata/cuda.hpp"
#include "strata/layers/mvn_layer.hpp"

#include "row_reduce.cuh"

namespace strata {

namespace {

// Each row's mean, then (normalize_variance) its standard deviation plus eps, from the deviations from that
// mean: the CPU's two passes, the sums in double.
template <typename Dtype>
void mvn_statistics(int rows, int dim, Dtype eps, const Dtype* x, Dtype* mean, Dtype* stdev) {
  row_reduce(
      rows, dim, [=] __device__(long long k, int) { return make_double2(static_cast<double>(x[k]), 0.0); },
      [=] __device__(int r, double sum, double) { mean[r] = static_cast<Dtype>(sum / dim); });
  if (!stdev) return;
  row_reduce(
      rows, dim,
      [=] __device__(long long k, int r) {
        const Dtype d = x[k] - mean[r];
        return make_double2(static_cast<double>(d * d), 0.0);
      },
      [=] __device__(int r, double sum, double) { stdev[r] = static_cast<Dtype>(sqrt(sum / dim)) + eps; });
}

// mean(dy) and, when y is given, mean(dy * y) for every row.
template <typename Dtype>
void mvn_grad_means(int rows, int dim, const Dtype* dy, const Dtype* y, Dtype* mean_dy, Dtype* mean_dy_y) {
  row_reduce(
      rows, dim,
      [=] __device__(long long k, int) {
        return make_double2(static_cast<double>(dy[k]), y ? static_cast<double>(dy[k] * y[k]) : 0.0);
      },
      [=] __device__(int r, double sum_dy, double sum_dy_y) {
        mean_dy[r] = static_cast<Dtype>(sum_dy / dim);
        mean_dy_y[r] = static_cast<Dtype>(sum_dy_y / dim);
      });
}

// y = (x - mean) / std, or x - mean without std; in place y is x, read and written per element.
template <typename Dtype>
__global__ void mvn_apply(long long n, int dim, const Dtype* x, const Dtype* mean, const Dtype* stdev, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long r = k / dim;
    const Dtype d = x[k] - mean[r];
    y[k] = stdev ? d / stdev[r] : d;
  }
}

// dx = (dy - mean(dy) - y * mean(dy * y)) / std, or dy - mean(dy) without y.
template <typename Dtype>
__global__ void mvn_backward(long long n, int dim, const Dtype* dy, const Dtype* y, const Dtype* stdev,
                             const Dtype* mean_dy, const Dtype* mean_dy_y, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long r = k / dim;
    dx[k] = y ? (dy[k] - mean_dy[r] - y[k] * mean_dy_y[r]) / stdev[r] : dy[k] - mean_dy[r];
  }
}

}  // namespace

template <typename Dtype>
void MVNLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const Dtype* x = bottom[0]->gpu_data();
  Dtype* mean = mean_.mutable_gpu_data();
  Dtype* stdev = normalize_variance() ? std_.mutable_gpu_data() : nullptr;
  mvn_statistics(rows_, dim_, eps_, x, mean, stdev);
  mvn_apply<<<cuda::blocks(n), cuda::kThreads>>>(n, dim_, x, mean, stdev, top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void MVNLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  const long long n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const Dtype* dy = top[0]->gpu_diff();
  const Dtype* y = normalize_variance() ? top[0]->gpu_data() : nullptr;
  const Dtype* stdev = normalize_variance() ? std_.gpu_data() : nullptr;
  Dtype* mean_dy = grad_.mutable_gpu_data();
  Dtype* mean_dy_y = mean_dy + rows_;
  mvn_grad_means(rows_, dim_, dy, y, mean_dy, mean_dy_y);
  mvn_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, dim_, dy, y, stdev, mean_dy, mean_dy_y,
                                                    bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(MVNLayer);

}  // namespace strata
