#include <type_traits>

#include "device_storage.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/inner_product_layer.hpp"

namespace strata {

namespace {

// y = sum + bias[column] over rows x columns: the 16-bit forward's float sums rounded once, with the bias.
template <typename T>
__global__ void add_bias_rounding(long long n, int columns, const float* sum, const float* bias, T* y) {
  STRATA_KERNEL_LOOP(i, n) put(&y[i], sum[i] + bias[i % columns]);
}

}  // namespace

// The CPU's GEMMs, on cuBLAS. M == 1 (a single row) would be a GEMV, but cuBLAS picks that path itself.
template <typename Dtype>
void InnerProductLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const ElementType stored = this->GpuStorage();
  if (stored == ElementType::kBf16) return ForwardGpuAs<bfloat16>(bottom, top);
  if (stored == ElementType::kFp16) return ForwardGpuAs<float16>(bottom, top);
  const Dtype* x = bottom[0]->gpu_data();
  const Dtype* w = this->blobs_[0]->gpu_data();
  Dtype* y = top[0]->mutable_gpu_data();
  if (M_ == 0) return;
  gpu_gemm<Dtype>(CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans, M_, N_, K_, Dtype(1), x, w, Dtype(0), y);
  if (bias_term_) {
    gpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, M_, N_, 1, Dtype(1), bias_multiplier_.gpu_data(),
                    this->blobs_[1]->gpu_data(), Dtype(1), y);
  }
}

template <typename Dtype>
void InnerProductLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  if (M_ == 0) return;
  const ElementType stored = this->GpuStorage();
  if (stored == ElementType::kBf16) return BackwardGpuAs<bfloat16>(top, propagate_down, bottom);
  if (stored == ElementType::kFp16) return BackwardGpuAs<float16>(top, propagate_down, bottom);
  const Dtype* dy = top[0]->gpu_diff();
  if (this->param_propagate_down(0)) {
    const Dtype* x = bottom[0]->gpu_data();
    Dtype* dw = this->blobs_[0]->mutable_gpu_diff();
    if (transpose_) {
      gpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K_, N_, M_, Dtype(1), x, dy, Dtype(1), dw);
    } else {
      gpu_gemm<Dtype>(CblasTrans, CblasNoTrans, N_, K_, M_, Dtype(1), dy, x, Dtype(1), dw);
    }
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    gpu_gemv<Dtype>(CblasTrans, M_, N_, Dtype(1), dy, bias_multiplier_.gpu_data(), Dtype(1),
                    this->blobs_[1]->mutable_gpu_diff());
  }
  if (propagate_down[0]) {
    const Dtype* w = this->blobs_[0]->gpu_data();
    gpu_gemm<Dtype>(CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, Dtype(1), dy, w, Dtype(0),
                    bottom[0]->mutable_gpu_diff());
  }
}

template <typename Dtype>
template <typename T>
void InnerProductLayer<Dtype>::ForwardGpuAs(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (!weights_16bit_) weights_16bit_ = std::make_shared<ParamCopy>();
    const T* x = gpu_data_as<T>(*bottom[0]);
    const T* w = weights_16bit_->of<T>(*this->blobs_[0], false);
    T* y = mutable_gpu_data_as<T>(*top[0], /*keep_values=*/false);
    if (M_ == 0) return;
    const CBLAS_TRANSPOSE tw = transpose_ ? CblasNoTrans : CblasTrans;
    if (!bias_term_) return gpu_gemm_16bit(CblasNoTrans, tw, M_, N_, K_, 1.f, x, w, 0.f, y, /*c_16bit=*/true);
    // The sums in float first, so that the bias is added before the one rounding.
    const long long n = static_cast<long long>(M_) * N_;
    float* sum = static_cast<float*>(cuda::workspace(n * sizeof(float)));
    gpu_gemm_16bit(CblasNoTrans, tw, M_, N_, K_, 1.f, x, w, 0.f, sum, /*c_16bit=*/false);
    add_bias_rounding<<<cuda::blocks(n), cuda::kThreads>>>(n, N_, sum, this->blobs_[1]->gpu_data(), y);
    STRATA_CUDA_KERNEL_CHECK();
  }
}

template <typename Dtype>
template <typename T>
void InnerProductLayer<Dtype>::BackwardGpuAs(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (!weights_16bit_) weights_16bit_ = std::make_shared<ParamCopy>();
    const T* dy = gpu_diff_as<T>(*top[0]);
    if (this->param_propagate_down(0)) {
      const T* x = gpu_data_as<T>(*bottom[0]);
      float* dw = this->blobs_[0]->mutable_gpu_diff();
      if (transpose_) {
        gpu_gemm_16bit(CblasTrans, CblasNoTrans, K_, N_, M_, 1.f, x, dy, 1.f, dw, /*c_16bit=*/false);
      } else {
        gpu_gemm_16bit(CblasTrans, CblasNoTrans, N_, K_, M_, 1.f, dy, x, 1.f, dw, /*c_16bit=*/false);
      }
    }
    if (bias_term_ && this->param_propagate_down(1)) {
      gpu_channel_sums_as(M_, N_, 1, dy, this->blobs_[1]->mutable_gpu_diff());
    }
    if (propagate_down[0]) {
      const T* w = weights_16bit_->of<T>(*this->blobs_[0], false);
      gpu_gemm_16bit(CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, 1.f, dy, w, 0.f,
                     mutable_gpu_diff_as<T>(*bottom[0], /*keep_values=*/false), /*c_16bit=*/true);
    }
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(InnerProductLayer);

}  // namespace strata
