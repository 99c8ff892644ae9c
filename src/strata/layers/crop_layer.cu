#include "crop_map.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/crop_layer.hpp"

namespace strata {

namespace {

// One thread per top element: y[i] = x[map(i)] (forward), dx[map(i)] = dy[i] (backward; dx zeroed first).
template <typename Dtype, bool kForward>
__global__ void crop_kernel(long long n, CropMap map, const Dtype* src, Dtype* dst) {
  STRATA_KERNEL_LOOP(i, n) {
    if (kForward) {
      dst[i] = src[map.bottom_index(i)];
    } else {
      dst[map.bottom_index(i)] = src[i];
    }
  }
}

}  // namespace

template <typename Dtype>
void CropLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (n == 0) return;
  const CropMap map(bottom[0]->shape(), top[0]->shape(), offsets_);
  crop_kernel<Dtype, true><<<cuda::blocks(n), cuda::kThreads>>>(n, map, bottom[0]->gpu_data(),
                                                                top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void CropLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1] && bottom[1]->count() > 0) {
    gpu_set(bottom[1]->count(), Dtype(0), bottom[1]->mutable_gpu_diff());
  }
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  Dtype* dx = bottom[0]->mutable_gpu_diff();
  gpu_set(bottom[0]->count(), Dtype(0), dx);
  const long long n = top[0]->count();
  if (n == 0) return;
  const CropMap map(bottom[0]->shape(), top[0]->shape(), offsets_);
  crop_kernel<Dtype, false><<<cuda::blocks(n), cuda::kThreads>>>(n, map, top[0]->gpu_diff(), dx);
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(CropLayer);

}  // namespace strata
