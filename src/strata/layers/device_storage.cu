// The 16-bit helpers' kernels (device_storage.cuh).
#include "device_storage.cuh"

#include <algorithm>

#include "channel_reduce.cuh"
#include "relu_device.cuh"

namespace strata {

namespace {

template <typename T>
__global__ void add_kernel(long long n, const T* x, float* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] += value_of(x[i]);
}

// y in the plain order, x channels-last: y's element (m, c, s) is x's at x_order.at(m, c, s).
template <typename T>
__global__ void add_from_channels_last_kernel(long long n, const T* x, ImageLayout x_order, float* y) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long s = i % x_order.S, c = (i / x_order.S) % x_order.C, m = i / (x_order.S * x_order.C);
    y[i] += value_of(x[x_order.at(m, c, s)]);
  }
}

// Up to kTerms summands at a time, passed by value.
constexpr int kTerms = 8;
template <typename T>
struct Terms {
  const T* x[kTerms];
  int count;
};

template <typename T>
__global__ void sum_kernel(long long n, Terms<T> t, bool accumulate, T* y) {
  STRATA_KERNEL_LOOP(i, n) {
    float s = accumulate ? value_of(y[i]) : 0.f;
    for (int k = 0; k < t.count; ++k) s += value_of(t.x[k][i]);
    put(&y[i], s);
  }
}

// Index: 32 bits where the blob fits (a 64-bit division per value would bound the kernel).
template <typename T, typename Index>
__global__ void bias_relu_kernel(Index n, Index spatial, Index channels, const float* bias, bool relu, T* y,
                                 bool channels_last) {
  STRATA_KERNEL_LOOP(i, n) {
    float v = value_of(y[i]);
    const Index k = static_cast<Index>(i);
    if (bias) v += bias[channels_last ? k % channels : (k / spatial) % channels];
    if (relu) v = relu_value(v, 0.f);
    put(&y[i], v);
  }
}

}  // namespace

template <typename T>
void gpu_bias_relu(long long n, int spatial, int channels, const float* bias, bool relu, T* y, bool channels_last) {
  if (n <= 0) return;
  if (n < (1LL << 31)) {
    bias_relu_kernel<T, unsigned><<<cuda::blocks(n), cuda::kThreads>>>(static_cast<unsigned>(n),
                                                                        static_cast<unsigned>(spatial),
                                                                        static_cast<unsigned>(channels), bias, relu, y,
                                                                        channels_last);
  } else {
    bias_relu_kernel<T, long long><<<cuda::blocks(n), cuda::kThreads>>>(n, spatial, channels, bias, relu, y,
                                                                         channels_last);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename T>
void gpu_sum_16bit(long long n, const std::vector<const T*>& terms, T* y) {
  if (n <= 0 || terms.empty()) return;
  // More than kTerms summands (a blob read by more than 8 layers) round once per group of kTerms.
  for (size_t first = 0; first < terms.size(); first += kTerms) {
    Terms<T> t{};
    t.count = static_cast<int>(std::min<size_t>(kTerms, terms.size() - first));
    for (int k = 0; k < t.count; ++k) t.x[k] = terms[first + k];
    sum_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, t, first > 0, y);
    STRATA_CUDA_KERNEL_CHECK();
  }
}

template <typename T>
void gpu_add_as(long long n, const T* x, float* y, ImageLayout x_order) {
  if (n <= 0) return;
  if (x_order.channels_last) {
    CHECK_EQ(n % (x_order.C * x_order.S), 0) << "a channels-last gradient of " << n << " values";
    add_from_channels_last_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, x_order, y);
  } else {
    add_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, y);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename T>
void gpu_channel_sums_as(int outer, int dim, int inner, const T* x, float* sums) {
  channel_reduce(
      outer, dim, inner, [=] __device__(long long k, int) { return make_double2(value_of(x[k]), 0.0); },
      [=] __device__(int d, double sum, double) { sums[d] += static_cast<float>(sum); });
}

#define STRATA_INSTANTIATE_STORED(T)                                                                   \
  template void gpu_bias_relu<T>(long long, int, int, const float*, bool, T*, bool);                 \
  template void gpu_add_as<T>(long long, const T*, float*, ImageLayout);                              \
  template void gpu_channel_sums_as<T>(int, int, int, const T*, float*);
STRATA_INSTANTIATE_STORED(float)
STRATA_INSTANTIATE_STORED(bfloat16)
STRATA_INSTANTIATE_STORED(float16)
#undef STRATA_INSTANTIATE_STORED

template void gpu_sum_16bit<bfloat16>(long long, const std::vector<const bfloat16*>&, bfloat16*);
template void gpu_sum_16bit<float16>(long long, const std::vector<const float16*>&, float16*);

}  // namespace strata
