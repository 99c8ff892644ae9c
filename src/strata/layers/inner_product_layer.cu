#include <type_traits>

#include "bf16_device.cuh"
#include "strata/cuda.hpp"
#include "strata/layers/inner_product_layer.hpp"

namespace strata {

namespace {

// y = bf16(sum + bias[column]) over rows x columns: the bfloat16 forward's float sums rounded once, with the bias.
__global__ void add_bias_to_bf16(long long n, int columns, const float* sum, const float* bias, bfloat16* y) {
  STRATA_KERNEL_LOOP(i, n) y[i] = to_bf16(sum[i] + bias[i % columns]);
}

}  // namespace

// The CPU's GEMMs, on cuBLAS. M == 1 (a single row) would be a GEMV, but cuBLAS picks that path itself.
template <typename Dtype>
void InnerProductLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (this->Bf16OnGpu()) return ForwardGpuBf16(bottom, top);
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
  if (this->Bf16OnGpu()) return BackwardGpuBf16(top, propagate_down, bottom);
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
void InnerProductLayer<Dtype>::ForwardGpuBf16(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (!bf16_weights_) bf16_weights_ = std::make_shared<ParamCopy>();
    const bfloat16* x = bottom[0]->gpu_data_bf16();
    const bfloat16* w = bf16_weights_->of<bfloat16>(*this->blobs_[0], false);
    bfloat16* y = top[0]->mutable_gpu_data_bf16(/*keep_values=*/false);
    if (M_ == 0) return;
    const CBLAS_TRANSPOSE tw = transpose_ ? CblasNoTrans : CblasTrans;
    if (!bias_term_) return gpu_gemm_bf16(CblasNoTrans, tw, M_, N_, K_, 1.f, x, w, 0.f, y, /*c_bf16=*/true);
    // The sums in float first, so that the bias is added before the one rounding.
    const long long n = static_cast<long long>(M_) * N_;
    float* sum = static_cast<float*>(cuda::workspace(n * sizeof(float)));
    gpu_gemm_bf16(CblasNoTrans, tw, M_, N_, K_, 1.f, x, w, 0.f, sum, /*c_bf16=*/false);
    add_bias_to_bf16<<<cuda::blocks(n), cuda::kThreads>>>(n, N_, sum, this->blobs_[1]->gpu_data(), y);
    STRATA_CUDA_KERNEL_CHECK();
  }
}

template <typename Dtype>
void InnerProductLayer<Dtype>::BackwardGpuBf16(const BlobVec& top, const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (!bf16_weights_) bf16_weights_ = std::make_shared<ParamCopy>();
    const bfloat16* dy = top[0]->gpu_diff_bf16();
    if (this->param_propagate_down(0)) {
      const bfloat16* x = bottom[0]->gpu_data_bf16();
      float* dw = this->blobs_[0]->mutable_gpu_diff();
      if (transpose_) {
        gpu_gemm_bf16(CblasTrans, CblasNoTrans, K_, N_, M_, 1.f, x, dy, 1.f, dw, /*c_bf16=*/false);
      } else {
        gpu_gemm_bf16(CblasTrans, CblasNoTrans, N_, K_, M_, 1.f, dy, x, 1.f, dw, /*c_bf16=*/false);
      }
    }
    if (bias_term_ && this->param_propagate_down(1)) {
      gpu_channel_sums_as(M_, N_, 1, dy, this->blobs_[1]->mutable_gpu_diff());
    }
    if (propagate_down[0]) {
      const bfloat16* w = bf16_weights_->of<bfloat16>(*this->blobs_[0], false);
      gpu_gemm_bf16(CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, 1.f, dy, w, 0.f,
                    bottom[0]->mutable_gpu_diff_bf16(/*keep_values=*/false), /*c_bf16=*/true);
    }
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(InnerProductLayer);

}  // namespace strata
