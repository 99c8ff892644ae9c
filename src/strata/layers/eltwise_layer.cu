#include <type_traits>

#include "device_storage.cuh"
#include "relu_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/eltwise_layer.hpp"

namespace strata {

namespace {

// An absorbed ReLU (Layer::Absorb; its slope is never negative here) in the sum's passes. T: how the values are
// stored (Dtype, or a 16-bit type with float arithmetic).
template <typename T>
__global__ void sum2(long long n, ComputeType<T> c0, const T* x0, ComputeType<T> c1, const T* x1, bool relu,
                     ComputeType<T> slope, T* y) {
  STRATA_KERNEL_LOOP(i, n) {
    const ComputeType<T> z = c0 * value_of(x0[i]) + c1 * value_of(x1[i]);
    put(&y[i], relu ? relu_value(z, slope) : z);
  }
}

// y = y + c * x, then the absorbed ReLU when `relu` (the sum's last pass): the bottoms after the second in 16 bits.
template <typename T>
__global__ void sum_more(long long n, float c, const T* x, bool relu, float slope, T* y) {
  STRATA_KERNEL_LOOP(i, n) {
    const float z = value_of(y[i]) + c * value_of(x[i]);
    put(&y[i], relu ? relu_value(z, slope) : z);
  }
}

// dx = c * (dy through the absorbed ReLU, whose output is y; none when y is null).
template <typename T>
__global__ void sum_relu_backward(long long n, ComputeType<T> c, const T* dy, const T* y, ComputeType<T> slope,
                                  T* dx) {
  STRATA_KERNEL_LOOP(i, n) {
    const ComputeType<T> g = value_of(dy[i]);
    put(&dx[i], c * (y ? g * relu_gradient_factor(value_of(y[i]), slope) : g));
  }
}

// The CPU's tie rule: between the first two a tie goes to bottom 1, after that an equal value keeps the earlier.
template <typename Dtype>
__global__ void max2(long long n, const Dtype* x0, const Dtype* x1, Dtype* y, Dtype* index) {
  STRATA_KERNEL_LOOP(i, n) {
    const bool first = x0[i] > x1[i];
    y[i] = first ? x0[i] : x1[i];
    index[i] = first ? Dtype(0) : Dtype(1);
  }
}

template <typename Dtype>
__global__ void max_more(long long n, const Dtype* x, Dtype id, Dtype* y, Dtype* index) {
  STRATA_KERNEL_LOOP(i, n) {
    if (x[i] > y[i]) {
      y[i] = x[i];
      index[i] = id;
    }
  }
}

template <typename Dtype>
__global__ void max_backward(long long n, const Dtype* dy, const Dtype* index, Dtype id, Dtype* dx) {
  STRATA_KERNEL_LOOP(i, n) dx[i] = index[i] == id ? dy[i] : Dtype(0);
}

}  // namespace

template <typename Dtype>
void EltwiseLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = top[0]->count();
  if (n == 0) return;
  // In bottom 0's order (a value at a time), the others converted to it.
  const DeviceFormat f = format_following(*bottom[0], this->GpuStorage());
  gpu_format_ = f;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (ComputesIn16Bit()) {
      with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
        using T = decltype(stored);
        const T* x0 = gpu_data_as<T>(*bottom[0], f);
        const T* x1 = gpu_data_as<T>(*bottom[1], f);
        T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false, f);  // may be x0 (in place)
        const float slope = relu_ ? relu_->negative_slope() : 0.f;
        const bool relu_now = relu_ && bottom.size() == 2;
        sum2<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), coeffs_[0], x0, coeffs_[1], x1,
                                                  relu_now, slope, y);
        STRATA_CUDA_KERNEL_CHECK();
        for (size_t b = 2; b < bottom.size(); ++b) {
          sum_more<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), coeffs_[b],
                                                        gpu_data_as<T>(*bottom[b], f),
                                                        relu_ && b + 1 == bottom.size(), slope, y);
          STRATA_CUDA_KERNEL_CHECK();
        }
      });
      return;
    }
  }
  const Dtype* x0 = bottom[0]->gpu_data_in(f);
  const Dtype* x1 = bottom[1]->gpu_data_in(f);
  // Every value written: a top in another format is not converted first. In place it is x0, already in f.
  Dtype* y = top[0]->mutable_gpu_data_in(f, /*keep_values=*/false);
  switch (op_) {
    case EltwiseParameter::SUM: {
      // An absorbed ReLU in the last pass over y.
      const bool relu_now = relu_ && bottom.size() == 2;
      const Dtype slope = relu_ ? relu_->negative_slope() : Dtype(0);
      sum2<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), coeffs_[0], x0, coeffs_[1], x1, relu_now,
                                                slope, y);
      STRATA_CUDA_KERNEL_CHECK();
      for (size_t b = 2; b < bottom.size(); ++b) gpu_axpy(n, coeffs_[b], bottom[b]->gpu_data_in(f), y);
      if (relu_ && !relu_now) {
        relu_in_place<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), slope, y);
        STRATA_CUDA_KERNEL_CHECK();
      }
      break;
    }
    case EltwiseParameter::PROD:
      gpu_mul(n, x0, x1, y);
      for (size_t b = 2; b < bottom.size(); ++b) gpu_mul(n, static_cast<const Dtype*>(y), bottom[b]->gpu_data_in(f), y);
      break;
    case EltwiseParameter::MAX: {
      Dtype* index = max_index_.mutable_gpu_data();
      max2<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), x0, x1, y, index);
      STRATA_CUDA_KERNEL_CHECK();
      for (size_t b = 2; b < bottom.size(); ++b) {
        max_more<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), bottom[b]->gpu_data_in(f),
                                                      static_cast<Dtype>(b), y, index);
        STRATA_CUDA_KERNEL_CHECK();
      }
      break;
    }
    default:
      STRATA_FAIL() << "unknown eltwise operation " << op_;
  }
}

template <typename Dtype>
void EltwiseLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  const int n = top[0]->count();
  if (n == 0) return;
  const DeviceFormat f = gpu_format_;  // forward's: the top's value may be gone (unread without a ReLU) or converted
  if constexpr (std::is_same<Dtype, float>::value) {
    if (ComputesIn16Bit()) {
      with_storage<Dtype>(this->GpuStorage(), [&](auto stored) {
        using T = decltype(stored);
        const T* dy = gpu_diff_as<T>(*top[0], f);
        const T* y = relu_ ? gpu_data_as<T>(*top[0], f) : nullptr;
        const float slope = relu_ ? relu_->negative_slope() : 0.f;
        // Bottom 0 last: in place, its gradient is the top's.
        for (int b = static_cast<int>(bottom.size()) - 1; b >= 0; --b) {
          if (!propagate_down[b]) continue;
          sum_relu_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), coeffs_[b], dy, y,
                                                                 slope, mutable_gpu_diff_as<T>(*bottom[b], false, f));
          STRATA_CUDA_KERNEL_CHECK();
        }
      });
      return;
    }
  }
  const Dtype* dy = top[0]->gpu_diff_in(f);
  // Bottom 0 last: in place, its diff is the top's.
  for (int b = static_cast<int>(bottom.size()) - 1; b >= 0; --b) {
    if (!propagate_down[b]) continue;
    Dtype* dx = bottom[b]->mutable_gpu_diff_in(f, /*keep_values=*/false);  // every value written
    switch (op_) {
      case EltwiseParameter::SUM:
        if (relu_) {
          sum_relu_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), coeffs_[b], dy,
                                                                 top[0]->gpu_data_in(f), relu_->negative_slope(), dx);
          STRATA_CUDA_KERNEL_CHECK();
        } else if (coeffs_[b] == Dtype(1)) {
          gpu_copy(n, dy, dx);
        } else {
          gpu_scale(n, coeffs_[b], dy, dx);
        }
        break;
      case EltwiseParameter::PROD:
        if (stable_prod_grad_) {
          bool first = true;
          for (int j = 0; j < static_cast<int>(bottom.size()); ++j) {
            if (j == b) continue;
            gpu_mul(n, first ? dy : static_cast<const Dtype*>(dx), bottom[j]->gpu_data_in(f), dx);
            first = false;
          }
        } else {
          gpu_mul(n, dy, top[0]->gpu_data_in(f), dx);
          gpu_div(n, static_cast<const Dtype*>(dx), bottom[b]->gpu_data_in(f), dx);
        }
        break;
      case EltwiseParameter::MAX:
        max_backward<<<cuda::blocks(n), cuda::kThreads>>>(static_cast<long long>(n), dy, max_index_.gpu_data(),
                                                          static_cast<Dtype>(b), dx);
        STRATA_CUDA_KERNEL_CHECK();
        break;
      default:
        STRATA_FAIL() << "unknown eltwise operation " << op_;
    }
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(EltwiseLayer);

}  // namespace strata
