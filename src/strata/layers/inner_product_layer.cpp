#include "strata/layers/inner_product_layer.hpp"

#include <type_traits>

#include "cpu_engine.hpp"
#include "onednn_inner_product.hpp"
#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void InnerProductLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InnerProductParameter& p = this->layer_param_.inner_product_param();
  STRATA_REQUIRE(p.num_output() > 0) << "inner_product_param.num_output must be positive";
  N_ = static_cast<int>(p.num_output());
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  const int axis = bottom[0]->CanonicalAxisIndex(p.axis());
  K_ = bottom[0]->count(axis);
  STRATA_REQUIRE(K_ > 0) << "the input (shape " << bottom[0]->shape_string() << ") has no values per row from axis "
                         << axis;
  if (!this->blobs_.empty()) {
    // Weights came with the layer (a caffemodel); check they fit.
    STRATA_REQUIRE(static_cast<int>(this->blobs_.size()) == (bias_term_ ? 2 : 1))
        << "expected " << (bias_term_ ? 2 : 1) << " parameter blobs, got " << this->blobs_.size();
  } else {
    this->blobs_.resize(bias_term_ ? 2 : 1);
    const std::vector<int> weight_shape = transpose_ ? std::vector<int>{K_, N_} : std::vector<int>{N_, K_};
    this->blobs_[0] = std::make_shared<Blob<Dtype>>(weight_shape);
    GetFiller<Dtype>(p.weight_filler())->Fill(this->blobs_[0].get());
    if (bias_term_) {
      this->blobs_[1] = std::make_shared<Blob<Dtype>>(std::vector<int>{N_});
      GetFiller<Dtype>(p.bias_filler())->Fill(this->blobs_[1].get());
    }
  }
  this->param_propagate_down_.assign(this->blobs_.size(), true);

  // bfloat16 (precision: BF16) is oneDNN's, with engine: ONEDNN. Unlike Convolution's, DEFAULT keeps the float
  // GEMMs even then: measured faster (docs/onednn.md; the weights' conversion and the separate addition of the
  // weight gradient cost more than bfloat16 saves at the models' batch sizes).
  bf16_ = std::is_same<Dtype, float>::value && this->layer_param_.precision() == BF16;
  onednn_ = MakeOneDnnEngine<onednn_ip::InnerProduct, Dtype>(p, "InnerProduct", this->layer_param_.name());
}

template <typename Dtype>
bool InnerProductLayer<Dtype>::ComputesIn16Bit() const {
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) return this->GpuPrecision() != ElementType::kOwn;
#endif
  return onednn_ && onednn_->bf16();
}

template <typename Dtype>
void InnerProductLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const InnerProductParameter& p = this->layer_param_.inner_product_param();
  const int axis = bottom[0]->CanonicalAxisIndex(p.axis());
  const int K = bottom[0]->count(axis);
  STRATA_REQUIRE(K == K_) << "input has " << K << " values per row from axis " << axis << " (shape "
                          << bottom[0]->shape_string() << "), the weights expect " << K_;
  M_ = bottom[0]->count(0, axis);
  std::vector<int> top_shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis);
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  if (bias_term_) {
    bias_multiplier_.Reshape({M_});
    cpu_set(M_, Dtype(1), bias_multiplier_.mutable_cpu_data());
  }
  // oneDNN's primitives for this shape (kept when it is the last one's); no rows, nothing to compute.
  if (onednn_ && M_ > 0) onednn_->Configure({M_, K_, N_, transpose_, bias_term_, bf16_});
}

template <typename Dtype>
void InnerProductLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      if (M_ == 0) return;
      onednn_->Forward(bottom[0]->cpu_data(), this->blobs_[0]->cpu_data(),
                       bias_term_ ? this->blobs_[1]->cpu_data() : nullptr, top[0]->mutable_cpu_data());
      return;
    }
  }
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* w = this->blobs_[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  cpu_gemm<Dtype>(CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans, M_, N_, K_, Dtype(1), x, w, Dtype(0), y);
  if (bias_term_) {
    cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, M_, N_, 1, Dtype(1), bias_multiplier_.cpu_data(),
                    this->blobs_[1]->cpu_data(), Dtype(1), y);
  }
}

template <typename Dtype>
void InnerProductLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  const Dtype* dy = top[0]->cpu_diff();
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      const bool weight_grad = this->param_propagate_down(0);
      const bool bias_grad = bias_term_ && this->param_propagate_down(1);
      if (M_ == 0 || (!weight_grad && !bias_grad && !propagate_down[0])) return;
      onednn_->Backward(dy, bottom[0]->cpu_data(), this->blobs_[0]->cpu_data(),
                        propagate_down[0] ? bottom[0]->mutable_cpu_diff() : nullptr,
                        weight_grad ? this->blobs_[0]->mutable_cpu_diff() : nullptr,
                        bias_grad ? this->blobs_[1]->mutable_cpu_diff() : nullptr);
      return;
    }
  }
  if (this->param_propagate_down(0)) {
    const Dtype* x = bottom[0]->cpu_data();
    Dtype* dw = this->blobs_[0]->mutable_cpu_diff();
    if (transpose_) {
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K_, N_, M_, Dtype(1), x, dy, Dtype(1), dw);
    } else {
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, N_, K_, M_, Dtype(1), dy, x, Dtype(1), dw);
    }
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    cpu_gemv<Dtype>(CblasTrans, M_, N_, Dtype(1), dy, bias_multiplier_.cpu_data(), Dtype(1),
                    this->blobs_[1]->mutable_cpu_diff());
  }
  if (propagate_down[0]) {
    const Dtype* w = this->blobs_[0]->cpu_data();
    Dtype* dx = bottom[0]->mutable_cpu_diff();
    cpu_gemm<Dtype>(CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, Dtype(1), dy, w, Dtype(0),
                    dx);
  }
}

STRATA_INSTANTIATE_CLASS(InnerProductLayer);
REGISTER_LAYER_CLASS(InnerProduct);

}  // namespace strata
