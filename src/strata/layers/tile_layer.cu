#include "strata/cuda.hpp"
#include "strata/layers/tile_layer.hpp"

namespace strata {

namespace {

// Top element k is copy t of bottom block i, element r: k = (i * tiles + t) * inner + r.
template <typename Dtype>
__global__ void tile_forward(long long n, int tiles, int inner, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long i = k / (static_cast<long long>(tiles) * inner);
    y[k] = x[i * inner + k % inner];
  }
}

// One thread per bottom element, summing its copies in order (as the CPU does).
template <typename Dtype>
__global__ void tile_backward(long long n, int tiles, int inner, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const long long i = k / inner, r = k % inner;
    const Dtype* d = dy + i * tiles * inner + r;
    Dtype s = d[0];
    for (int t = 1; t < tiles; ++t) s += d[static_cast<long long>(t) * inner];
    dx[k] = s;
  }
}

}  // namespace

template <typename Dtype>
void TileLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (n == 0) return;
  tile_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, tiles_, inner_, bottom[0]->gpu_data(),
                                                    top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void TileLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const long long n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  tile_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, tiles_, inner_, top[0]->gpu_diff(),
                                                     bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(TileLayer);

}  // namespace strata
