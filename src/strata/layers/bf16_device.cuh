// What the layers that compute in bfloat16 or channels-last on the GPU share (precision: BF16; docs/gpu.md,
// "bfloat16" and "Channels-last"). Private to src/strata/layers. bfloat16 values are computed in float: a kernel
// reads an element through value_of and writes it through put (memory_format.hpp), so one template serves blobs held
// in float and in bfloat16.
#pragma once

#include <memory>
#include <type_traits>
#include <vector>

#include "strata/blob.hpp"
#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
#include "strata/device.hpp"
#include "strata/math_functions.hpp"
#include "strata/memory_format.hpp"

namespace strata {

// The arithmetic type of a stored element type: float for bfloat16, the type itself otherwise.
template <typename T>
using ComputeType = std::conditional_t<std::is_same<T, bfloat16>::value, float, T>;

// The device format of values stored as T (the blob's own type, or bfloat16) in an order.
template <typename T>
constexpr DeviceFormat format_of(bool channels_last) {
  return device_format_for(std::is_same<T, bfloat16>::value, channels_last);
}

// A blob's device memory with its values stored as T in `format`: the blob's own type (kPlain, or kNhwc for float
// channels-last) or bfloat16 (kBf16, kBf16Nhwc: Blob's *_bf16 accessors), so that one template of a layer's GPU pass
// serves every format. `format` holds T: format_of<T>.
template <typename T, typename Dtype>
const T* gpu_data_as(const Blob<Dtype>& b, DeviceFormat format = format_of<T>(false)) {
  if constexpr (std::is_same<T, bfloat16>::value) return b.gpu_data_bf16(format);
  else return b.gpu_data_in(format);
}
template <typename T, typename Dtype>
const T* gpu_diff_as(const Blob<Dtype>& b, DeviceFormat format = format_of<T>(false)) {
  if constexpr (std::is_same<T, bfloat16>::value) return b.gpu_diff_bf16(format);
  else return b.gpu_diff_in(format);
}
// keep_values: as the *_bf16 and *_in accessors' (false: the caller writes every value).
template <typename T, typename Dtype>
T* mutable_gpu_data_as(Blob<Dtype>& b, bool keep_values, DeviceFormat format = format_of<T>(false)) {
  if constexpr (std::is_same<T, bfloat16>::value) return b.mutable_gpu_data_bf16(keep_values, format);
  else return b.mutable_gpu_data_in(format, keep_values);
}
template <typename T, typename Dtype>
T* mutable_gpu_diff_as(Blob<Dtype>& b, bool keep_values, DeviceFormat format = format_of<T>(false)) {
  if constexpr (std::is_same<T, bfloat16>::value) return b.mutable_gpu_diff_bf16(keep_values, format);
  else return b.mutable_gpu_diff_in(format, keep_values);
}

// Runs pass(T{}) with T the type a layer's activations are stored as in this pass: bfloat16 when `bf16`, else the
// layer's Dtype. The pass reads T's memory through the *_as accessors above, so one body serves both.
template <typename Dtype, typename Pass>
void with_storage(bool bf16, Pass pass) {
  if (bf16) {
    pass(bfloat16{});
  } else {
    pass(Dtype{});
  }
}

// The format of a pass on the GPU (docs/gpu.md, "Channels-last"): its element type is the layer's (bfloat16 or the
// blob's own type), its order the rule's. Convolutions choose the order: channels-last for images (4 axes) where
// gpu_options() asks it for their precision. Every other layer with channels-last GPU code follows the blob it reads
// (its first bottom forward; backward, the order its forward ran in), so the order a convolution sets carries
// through the ReLUs, BatchNorms, sums and poolings after it; a follower converts its other operands to it.
template <typename Dtype>
DeviceFormat format_for_images(const Blob<Dtype>& x, bool bf16) {
  const bool last = std::is_same<Dtype, float>::value && gpu_options().channels_last_for(bf16) && x.can_channels_last();
  return device_format_for(bf16, last);
}
template <typename Dtype>
DeviceFormat format_following(const Blob<Dtype>& x, bool bf16) {
  const bool last = std::is_same<Dtype, float>::value && is_channels_last(x.data_device_format());
  return device_format_for(bf16, last);
}
// The layout a kernel indexes an (N, C, S...) blob by in `format`.
template <typename Dtype>
ImageLayout image_layout(const Blob<Dtype>& x, DeviceFormat format) {
  return {x.shape(1), x.count(2), is_channels_last(format)};
}

// A parameter's copy in a device format for a layer's multiplications (bfloat16, and for a convolution's (K, C, R, S)
// weights with channels-last activations (K, R, S, C), the filter order cuDNN reads them in): made again only when
// the parameter has changed (SyncedMemory::version: once per update), not on every pass.
class ParamCopy {
 public:
  template <typename T>
  const T* of(const Blob<float>& param, bool channels_last) {
    return static_cast<const T*>(in(param, format_of<T>(channels_last)));
  }

 private:
  const void* in(const Blob<float>& param, DeviceFormat format) {
    const std::shared_ptr<SyncedMemory>& m = param.data();
    const size_t count = static_cast<size_t>(param.count());
    if (source_.lock() != m || m->version() != version_ || count != count_ || format != format_) {
      CHECK(format != DeviceFormat::kPlain) << "a parameter's plain copy: read the parameter itself";
      const float* x = param.gpu_data();
      const size_t bytes = count * (is_bf16(format) ? sizeof(bfloat16) : sizeof(float));
      if (!copy_ || copy_->size() < bytes) {
        copy_ = std::make_unique<SyncedMemory>(bytes, MemoryCategory::kParameter);
      }
      void* y = copy_->mutable_gpu_data();
      if (is_channels_last(format)) {
        CHECK_EQ(param.num_axes(), 4) << "a channels-last copy of a parameter of shape " << param.shape_string();
        const LayoutShape shape{param.shape(0), param.shape(1), param.count(2), 0};
        gpu_reformat(count, shape, DeviceFormat::kPlain, x, format, y);
      } else {
        gpu_to_bf16(count, x, static_cast<bfloat16*>(y));
      }
      source_ = m;
      version_ = m->version();
      count_ = count;
      format_ = format;
    }
    return copy_->gpu_data();
  }

  std::weak_ptr<SyncedMemory> source_;
  uint64_t version_ = 0;
  size_t count_ = 0;
  DeviceFormat format_ = DeviceFormat::kPlain;
  std::unique_ptr<SyncedMemory> copy_;
};

// C = alpha op(A) op(B) + beta C, row-major as gpu_gemm: A and B in bfloat16, products summed in float on tensor
// cores, C in float or (c_bf16) bfloat16.
inline void gpu_gemm_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                          const bfloat16* A, const bfloat16* B, float beta, void* C, bool c_bf16) {
  const int lda = ta == CblasNoTrans ? K : M;
  const int ldb = tb == CblasNoTrans ? N : K;
  const auto op = [](CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CUBLAS_OP_N : CUBLAS_OP_T; };
  // Row-major C is column-major C^T = op(B)^T op(A)^T: the operands swap, as in gpu_gemm.
  STRATA_CUBLAS(cublasGemmEx, cuda::cublas(), op(tb), op(ta), N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF,
                lda, &beta, C, c_bf16 ? CUDA_R_16BF : CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// y = ReLU(y + bias[c]) over n values of `channels` x `spatial` each image, stored as T (float or bfloat16),
// channels-first or (channels_last) channels-last (bias may be null, relu false), in float (bfloat16: rounded once
// more): a convolution's epilogue after cuDNN's output.
template <typename T>
void gpu_bias_relu(long long n, int spatial, int channels, const float* bias, bool relu, T* y, bool channels_last);
// y[i] += x[i] over n values: a gradient computed in T (float or bfloat16) added to its float accumulator
// (bf16_device.cu). With x_order.channels_last, x holds y's (n / (C S), C, S) values channels-last (a convolution's
// weight gradient in the filter order of channels-last activations).
template <typename T>
void gpu_add_as(long long n, const T* x, float* y, ImageLayout x_order = {});
// Copies `rows` rows of `width` values between strided bfloat16 matrices (gpu_copy_rows's bfloat16 form).
void gpu_copy_rows_bf16(int rows, int width, const bfloat16* src, int src_stride, bfloat16* dst, int dst_stride);
// gpu_copy_rows for values stored as T (Dtype, or bfloat16).
template <typename T>
void gpu_copy_rows_as(int rows, int width, const T* src, int src_stride, T* dst, int dst_stride) {
  if constexpr (std::is_same<T, bfloat16>::value) {
    gpu_copy_rows_bf16(rows, width, src, src_stride, dst, dst_stride);
  } else {
    gpu_copy_rows(rows, width, src, src_stride, dst, dst_stride);
  }
}
// y = x_0 + x_1 + ... over n values, summed in float and rounded once (a Split's gradients).
void gpu_sum_bf16(long long n, const std::vector<const bfloat16*>& terms, bfloat16* y);
// sums[d] += the sum of x over outer x inner for every d of a blob seen as (outer, dim, inner), x stored as T (float
// or bfloat16), summed in double as channel_reduce.cuh sums: a bias's gradient.
template <typename T>
void gpu_channel_sums_as(int outer, int dim, int inner, const T* x, float* sums);

}  // namespace strata
