// What the layers that compute in 16 bits or channels-last on the GPU share (precision: BF16 and FP16; docs/gpu.md,
// "bfloat16", "float16" and "Channels-last"). Private to src/strata/layers. 16-bit values are computed in float: a
// kernel reads an element through value_of and writes it through put (memory_format.hpp), so one template serves
// blobs held in float, bfloat16 and float16.
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

// The element type values stored as T are (kOwn: the blob's own type), and its device format in an order.
template <typename T>
constexpr ElementType element_type_as() {
  if constexpr (std::is_same<T, bfloat16>::value) return ElementType::kBf16;
  else if constexpr (std::is_same<T, float16>::value) return ElementType::kFp16;
  else return ElementType::kOwn;
}
// Whether T is one of the 16-bit storage types.
template <typename T>
constexpr bool is_16bit_type = element_type_as<T>() != ElementType::kOwn;

// The arithmetic type of a stored element type: float for the 16-bit types, the type itself otherwise.
template <typename T>
using ComputeType = std::conditional_t<is_16bit_type<T>, float, T>;

template <typename T>
constexpr DeviceFormat format_of(bool channels_last) {
  return device_format_for(element_type_as<T>(), channels_last);
}

// cuBLAS's name of a 16-bit storage type.
template <typename T>
constexpr cudaDataType_t cuda_type_of() {
  static_assert(is_16bit_type<T>, "a 16-bit storage type");
  return std::is_same<T, bfloat16>::value ? CUDA_R_16BF : CUDA_R_16F;
}

// A blob's device memory with its values stored as T in `format`: the blob's own type (kPlain, or kNhwc for float
// channels-last) or a 16-bit type (Blob's *_16bit accessors), so that one template of a layer's GPU pass serves every
// format. `format` holds T: format_of<T>.
template <typename T, typename Dtype>
const T* gpu_data_as(const Blob<Dtype>& b, DeviceFormat format = format_of<T>(false)) {
  DCHECK(element_type_of(format) == element_type_as<T>()) << format_name(format);
  if constexpr (is_16bit_type<T>) return static_cast<const T*>(b.gpu_data_16bit(format));
  else return b.gpu_data_in(format);
}
template <typename T, typename Dtype>
const T* gpu_diff_as(const Blob<Dtype>& b, DeviceFormat format = format_of<T>(false)) {
  DCHECK(element_type_of(format) == element_type_as<T>()) << format_name(format);
  if constexpr (is_16bit_type<T>) return static_cast<const T*>(b.gpu_diff_16bit(format));
  else return b.gpu_diff_in(format);
}
// keep_values: as the *_16bit and *_in accessors' (false: the caller writes every value).
template <typename T, typename Dtype>
T* mutable_gpu_data_as(Blob<Dtype>& b, bool keep_values, DeviceFormat format = format_of<T>(false)) {
  DCHECK(element_type_of(format) == element_type_as<T>()) << format_name(format);
  if constexpr (is_16bit_type<T>) return static_cast<T*>(b.mutable_gpu_data_16bit(format, keep_values));
  else return b.mutable_gpu_data_in(format, keep_values);
}
template <typename T, typename Dtype>
T* mutable_gpu_diff_as(Blob<Dtype>& b, bool keep_values, DeviceFormat format = format_of<T>(false)) {
  DCHECK(element_type_of(format) == element_type_as<T>()) << format_name(format);
  if constexpr (is_16bit_type<T>) return static_cast<T*>(b.mutable_gpu_diff_16bit(format, keep_values));
  else return b.mutable_gpu_diff_in(format, keep_values);
}

// Runs pass(T{}) with T the type a layer's activations are stored as in this pass: bfloat16 or float16 for those
// element types (float layers only), else the layer's Dtype. The pass reads T's memory through the *_as accessors
// above, so one body serves every type.
template <typename Dtype, typename Pass>
void with_storage(ElementType type, Pass pass) {
  if constexpr (!std::is_same<Dtype, float>::value) {
    CHECK(type == ElementType::kOwn) << "only a float layer stores its activations in 16 bits";
    pass(Dtype{});
  } else if (type == ElementType::kBf16) {
    pass(bfloat16{});
  } else if (type == ElementType::kFp16) {
    pass(float16{});
  } else {
    pass(Dtype{});
  }
}

// The format of a pass on the GPU (docs/gpu.md, "Channels-last"): its element type is the layer's (a 16-bit type or
// the blob's own type), its order the rule's. Convolutions choose the order: channels-last for images (4 axes) where
// gpu_options() asks it for their precision. Every other layer with channels-last GPU code follows the blob it reads
// (its first bottom forward; backward, the order its forward ran in), so the order a convolution sets carries
// through the ReLUs, BatchNorms, sums and poolings after it; a follower converts its other operands to it.
template <typename Dtype>
DeviceFormat format_for_images(const Blob<Dtype>& x, ElementType type) {
  const bool last = std::is_same<Dtype, float>::value && gpu_options().channels_last_for(type != ElementType::kOwn) &&
                    x.can_channels_last();
  return device_format_for(type, last);
}
template <typename Dtype>
DeviceFormat format_following(const Blob<Dtype>& x, ElementType type) {
  const bool last = std::is_same<Dtype, float>::value && is_channels_last(x.data_device_format());
  return device_format_for(type, last);
}
// The layout a kernel indexes an (N, C, S...) blob by in `format`.
template <typename Dtype>
ImageLayout image_layout(const Blob<Dtype>& x, DeviceFormat format) {
  return {x.shape(1), x.count(2), is_channels_last(format)};
}

// A parameter's copy in a device format for a layer's multiplications (16-bit, and for a convolution's (K, C, R, S)
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
      const size_t bytes = count * (is_16bit(format) ? sizeof(uint16_t) : sizeof(float));
      if (!copy_ || copy_->size() < bytes) {
        copy_ = std::make_unique<SyncedMemory>(bytes, MemoryCategory::kParameter);
      }
      void* y = copy_->mutable_gpu_data();
      LayoutShape shape;
      if (is_channels_last(format)) {
        CHECK_EQ(param.num_axes(), 4) << "a channels-last copy of a parameter of shape " << param.shape_string();
        shape = {param.shape(0), param.shape(1), param.count(2), 0};
      }
      gpu_reformat(count, shape, DeviceFormat::kPlain, x, format, y);
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

// C = alpha op(A) op(B) + beta C, row-major as gpu_gemm: A and B stored as T (bfloat16 or float16), products summed
// in float on tensor cores, C in float or (c_16bit) T.
template <typename T>
void gpu_gemm_16bit(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const T* A, const T* B,
                    float beta, void* C, bool c_16bit) {
  const int lda = ta == CblasNoTrans ? K : M;
  const int ldb = tb == CblasNoTrans ? N : K;
  const auto op = [](CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CUBLAS_OP_N : CUBLAS_OP_T; };
  constexpr cudaDataType_t type = cuda_type_of<T>();
  // Row-major C is column-major C^T = op(B)^T op(A)^T: the operands swap, as in gpu_gemm.
  STRATA_CUBLAS(cublasGemmEx, cuda::cublas(), op(tb), op(ta), N, M, K, &alpha, B, type, ldb, A, type, lda, &beta, C,
                c_16bit ? type : CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// y = ReLU(y + bias[c]) over n values of `channels` x `spatial` each image, stored as T (float or 16-bit),
// channels-first or (channels_last) channels-last (bias may be null, relu false), in float (16-bit: rounded once
// more): a convolution's epilogue after cuDNN's output.
template <typename T>
void gpu_bias_relu(long long n, int spatial, int channels, const float* bias, bool relu, T* y, bool channels_last);
// y[i] += x[i] over n values: a gradient computed in T (float or 16-bit) added to its float accumulator
// (device_storage.cu). With x_order.channels_last, x holds y's (n / (C S), C, S) values channels-last (a convolution's
// weight gradient in the filter order of channels-last activations).
template <typename T>
void gpu_add_as(long long n, const T* x, float* y, ImageLayout x_order = {});
// gpu_copy_rows for values stored as T (Dtype, or a 16-bit type, copied as its bits).
template <typename T>
void gpu_copy_rows_as(int rows, int width, const T* src, int src_stride, T* dst, int dst_stride) {
  if constexpr (is_16bit_type<T>) {
    static_assert(sizeof(T) == sizeof(uint16_t), "a 16-bit storage type");
    gpu_copy_rows(rows, width, reinterpret_cast<const uint16_t*>(src), src_stride, reinterpret_cast<uint16_t*>(dst),
                  dst_stride);
  } else {
    gpu_copy_rows(rows, width, src, src_stride, dst, dst_stride);
  }
}
// y = x_0 + x_1 + ... over n values stored as T (a 16-bit type), summed in float and rounded once (a Split's
// gradients).
template <typename T>
void gpu_sum_16bit(long long n, const std::vector<const T*>& terms, T* y);
// sums[d] += the sum of x over outer x inner for every d of a blob seen as (outer, dim, inner), x stored as T (float
// or 16-bit), summed in double as channel_reduce.cuh sums: a bias's gradient.
template <typename T>
void gpu_channel_sums_as(int outer, int dim, int inner, const T* x, float* sums);

}  // namespace strata
