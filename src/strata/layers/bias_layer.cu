#include "strata/cuda.hpp"
#include "strata/layers/bias_layer.hpp"

#include "channel_reduce.cuh"

namespace strata {

namespace {

template <typename Dtype>
__global__ void affine_kernel(long long n, int dim, int inner, const Dtype* x, const Dtype* scale,
                              const Dtype* shift, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const int d = (k / inner) % dim;
    y[k] = x[k] * (scale ? scale[d] : Dtype(1)) + (shift ? shift[d] : Dtype(0));
  }
}

}  // namespace

template <typename Dtype>
void gpu_broadcast_affine(const BroadcastGeometry& g, const Dtype* x, const Dtype* scale, const Dtype* shift,
                          Dtype* y) {
  const long long n = static_cast<long long>(g.outer) * g.dim * g.inner;
  if (n == 0) return;
  affine_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, g.dim, g.inner, x, scale, shift, y);
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void gpu_broadcast_reduce(const BroadcastGeometry& g, const Dtype* a, const Dtype* b, bool accumulate, Dtype* out) {
  channel_reduce(
      g.outer, g.dim, g.inner,
      [=] __device__(long long k, int) {
        return make_double2(b ? static_cast<double>(a[k]) * b[k] : static_cast<double>(a[k]), 0.0);
      },
      [=] __device__(int d, double sum, double) {
        out[d] = static_cast<Dtype>(accumulate ? out[d] + sum : sum);
      });
}

template void gpu_broadcast_affine<float>(const BroadcastGeometry&, const float*, const float*, const float*, float*);
template void gpu_broadcast_affine<double>(const BroadcastGeometry&, const double*, const double*, const double*,
                                           double*);
template void gpu_broadcast_reduce<float>(const BroadcastGeometry&, const float*, const float*, bool, float*);
template void gpu_broadcast_reduce<double>(const BroadcastGeometry&, const double*, const double*, bool, double*);

template <typename Dtype>
void BiasLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& bias = bottom.size() > 1 ? *bottom[1] : *this->blobs_[0];
  gpu_broadcast_affine<Dtype>(geom_, bottom[0]->gpu_data(), nullptr, bias.gpu_data(), top[0]->mutable_gpu_data());
}

template <typename Dtype>
void BiasLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const Dtype* dy = top[0]->gpu_diff();
  const bool bias_is_bottom = bottom.size() > 1;
  if (bias_is_bottom ? propagate_down[1] : this->param_propagate_down(0)) {
    Dtype* db = bias_is_bottom ? bottom[1]->mutable_gpu_diff() : this->blobs_[0]->mutable_gpu_diff();
    gpu_broadcast_reduce<Dtype>(geom_, dy, nullptr, !bias_is_bottom, db);
  }
  if (propagate_down[0] && bottom[0] != top[0]) gpu_copy(bottom[0]->count(), dy, bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(BiasLayer);

}  // namespace strata
