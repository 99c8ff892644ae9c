// The bfloat16 helpers' kernels (bf16_device.cuh).
#include "bf16_device.cuh"

#include <algorithm>

#include "channel_reduce.cuh"
#include "relu_device.cuh"

namespace strata {

namespace {

__global__ void add_bf16_kernel(long long n, const bfloat16* x, float* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] += from_bf16(x[i]);
}

// y in the plain order, x channels-last: y's element (m, c, s) is x's at x_order.at(m, c, s).
__global__ void add_bf16_from_channels_last_kernel(long long n, const bfloat16* x, ImageLayout x_order, float* y) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long s = i % x_order.S, c = (i / x_order.S) % x_order.C, m = i / (x_order.S * x_order.C);
    y[i] += from_bf16(x[x_order.at(m, c, s)]);
  }
}

// Up to kTerms summands at a time, passed by value.
constexpr int kTerms = 8;
struct Terms {
  const bfloat16* x[kTerms];
  int count;
};

__global__ void sum_bf16_kernel(long long n, Terms t, bool accumulate, bfloat16* y) {
  STRATA_KERNEL_LOOP(i, n) {
    float s = accumulate ? from_bf16(y[i]) : 0.f;
    for (int k = 0; k < t.count; ++k) s += from_bf16(t.x[k][i]);
    y[i] = to_bf16(s);
  }
}

// Index: 32 bits where the blob fits (a 64-bit division per value would bound the kernel).
template <typename Index>
__global__ void bias_relu_kernel(Index n, Index spatial, Index channels, const float* bias, bool relu, bfloat16* y,
                                 bool channels_last) {
  STRATA_KERNEL_LOOP(i, n) {
    float v = from_bf16(y[i]);
    const Index k = static_cast<Index>(i);
    if (bias) v += bias[channels_last ? k % channels : (k / spatial) % channels];
    if (relu) v = relu_value(v, 0.f);
    y[i] = to_bf16(v);
  }
}

}  // namespace

void gpu_bias_relu_bf16(long long n, int spatial, int channels, const float* bias, bool relu, bfloat16* y,
                        bool channels_last) {
  if (n <= 0) return;
  if (n < (1LL << 31)) {
    bias_relu_kernel<unsigned><<<cuda::blocks(n), cuda::kThreads>>>(static_cast<unsigned>(n),
                                                                     static_cast<unsigned>(spatial),
                                                                     static_cast<unsigned>(channels), bias, relu, y,
                                                                     channels_last);
  } else {
    bias_relu_kernel<long long><<<cuda::blocks(n), cuda::kThreads>>>(n, spatial, channels, bias, relu, y,
                                                                      channels_last);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_copy_rows_bf16(int rows, int width, const bfloat16* src, int src_stride, bfloat16* dst, int dst_stride) {
  if (rows <= 0 || width <= 0) return;
  STRATA_CUDA_CHECK(cudaMemcpy2D(dst, sizeof(bfloat16) * dst_stride, src, sizeof(bfloat16) * src_stride,
                                 sizeof(bfloat16) * width, rows, cudaMemcpyDeviceToDevice));
}

void gpu_sum_bf16(long long n, const std::vector<const bfloat16*>& terms, bfloat16* y) {
  if (n <= 0 || terms.empty()) return;
  // More than kTerms summands (a blob read by more than 8 layers) round once per group of kTerms.
  for (size_t first = 0; first < terms.size(); first += kTerms) {
    Terms t{};
    t.count = static_cast<int>(std::min<size_t>(kTerms, terms.size() - first));
    for (int k = 0; k < t.count; ++k) t.x[k] = terms[first + k];
    sum_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, t, first > 0, y);
    STRATA_CUDA_KERNEL_CHECK();
  }
}

void gpu_add_bf16(long long n, const bfloat16* x, float* y, ImageLayout x_order) {
  if (n <= 0) return;
  if (x_order.channels_last) {
    CHECK_EQ(n % (x_order.C * x_order.S), 0) << "a channels-last gradient of " << n << " values";
    add_bf16_from_channels_last_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, x_order, y);
  } else {
    add_bf16_kernel<<<cuda::blocks(n), cuda::kThreads>>>(n, x, y);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

void gpu_channel_sums_bf16(int outer, int dim, int inner, const bfloat16* x, float* sums) {
  channel_reduce(
      outer, dim, inner, [=] __device__(long long k, int) { return make_double2(from_bf16(x[k]), 0.0); },
      [=] __device__(int d, double sum, double) { sums[d] += static_cast<float>(sum); });
}

}  // namespace strata
