#include "device_storage.cuh"
#include "relu_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/relu_layer.hpp"

namespace strata {

namespace {

// T: how the values are stored (Dtype, or a 16-bit type with float arithmetic).
template <typename T>
__global__ void relu_forward(long long n, const T* x, T* y, ComputeType<T> slope) {
  STRATA_KERNEL_LOOP(i, n) put(&y[i], relu_value(value_of(x[i]), slope));
}

template <typename T>
__global__ void relu_backward(long long n, const T* s, const T* dy, T* dx, ComputeType<T> slope) {
  STRATA_KERNEL_LOOP(i, n) put(&dx[i], value_of(dy[i]) * relu_gradient_factor(value_of(s[i]), slope));
}

}  // namespace

template <typename Dtype>
void ReLULayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  if (n == 0) return;
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
    using T = decltype(stored);
    const DeviceFormat f = format_following(*bottom[0], this->GpuStorage());  // any order: a value at a time
    gpu_format_ = f;
    const T* x = gpu_data_as<T>(*bottom[0], f);  // before the top's pointer: they may be one blob
    relu_forward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x,
                                                      mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f),
                                                      static_cast<ComputeType<T>>(negative_slope_));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = negative_slope_;
  RequireBackwardNotInPlace(top, bottom);
  const int n = bottom[0]->count();
  if (n == 0) return;
  const Blob<Dtype>* source = slope >= 0 ? top[0] : bottom[0];
  with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
    using T = decltype(stored);
    // Forward's order (with a negative slope the top's value may be gone); where another layer ran the forward (a
    // convolution's epilogue), the order that layer wrote the top in.
    const DeviceFormat f = this->absorbed() ? format_following(*top[0], this->GpuStorage()) : gpu_format_;
    // The reads first: in place, the gradients are one blob, which the write must find converted already.
    const T* s = gpu_data_as<T>(*source, f);
    const T* dy = gpu_diff_as<T>(*top[0], f);
    relu_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), s, dy,
                                                       mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false, f),
                                                       static_cast<ComputeType<T>>(slope));
  });
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ReLULayer);

}  // namespace strata
