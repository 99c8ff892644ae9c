#include "strata/cuda.hpp"
#include "strata/layers/filter_layer.hpp"

namespace strata {

namespace {

// Over the bottom's elements: element r of item n goes to item position[n] of the top, if it is kept.
template <typename Dtype>
__global__ void filter_forward(long long n, int dim, const int* position, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(k, n) {
    const int p = position[k / dim];
    if (p >= 0) y[static_cast<long long>(p) * dim + k % dim] = x[k];
  }
}

// The reverse: a kept item's gradient comes from its top item, the others get zero.
template <typename Dtype>
__global__ void filter_backward(long long n, int dim, const int* position, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const int p = position[k / dim];
    dx[k] = p >= 0 ? dy[static_cast<long long>(p) * dim + k % dim] : Dtype(0);
  }
}

}  // namespace

template <typename Dtype>
void FilterLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  RequireSelection();
  const int* position = static_cast<const int*>(position_->gpu_data());
  for (size_t t = 0; t < top.size(); ++t) {
    const long long n = bottom[t]->count();
    if (n == 0) continue;
    filter_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[t]->count(1), position, bottom[t]->gpu_data(),
                                                        top[t]->mutable_gpu_data());
    STRATA_CUDA_KERNEL_CHECK();
  }
}

template <typename Dtype>
void FilterLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  RefuseSelectorGradient(propagate_down);
  const int* position = static_cast<const int*>(position_->gpu_data());
  for (size_t t = 0; t < top.size(); ++t) {
    const long long n = bottom[t]->count();
    if (!propagate_down[t] || n == 0) continue;
    const Dtype* dy = selected_ > 0 ? top[t]->gpu_diff() : nullptr;
    filter_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, bottom[t]->count(1), position, dy,
                                                         bottom[t]->mutable_gpu_diff());
    STRATA_CUDA_KERNEL_CHECK();
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(FilterLayer);

}  // namespace strata
