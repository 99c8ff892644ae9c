#include "strata/cuda.hpp"
#include "strata/layers/inner_product_layer.hpp"

namespace strata {

// The CPU's GEMMs, on cuBLAS. M == 1 (a single row) would be a GEMV, but cuBLAS picks that path itself.
template <typename Dtype>
void InnerProductLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
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

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(InnerProductLayer);

}  // namespace strata
