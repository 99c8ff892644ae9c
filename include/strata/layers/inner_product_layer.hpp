#pragma once

#include <memory>

#include "strata/layer.hpp"

namespace strata {

#ifdef STRATA_USE_CUDA
class ParamCopy;  // a parameter's copy in a device format (src/strata/layers/device_storage.cuh)
#endif
namespace onednn_ip {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_inner_product.hpp).
class InnerProduct;
}  // namespace onednn_ip

// Fully connected: top = bottom * W^T + b over the axes from `axis` on (W is num_output x K, or K x
// num_output with transpose: true). One GEMM forward, two backward.
//
// On the CPU, inner_product_param.engine (Strata's field 1000) picks who computes: CAFFE the GEMMs above (the
// reference), ONEDNN oneDNN's inner product (float only; transposed weights too), DEFAULT oneDNN in float where
// measured faster (docs/onednn.md), the GEMMs above otherwise and in double. precision: BF16 multiplies in
// bfloat16 with engine ONEDNN where the CPU has the kernels (DEFAULT stays on the float GEMMs: measured faster). On
// the GPU, cuBLAS; with Layer::GpuPrecision its input, output and their gradients are in its 16-bit type and the
// GEMMs multiply in it and sum in float (the weight gradient accumulates in float).
template <typename Dtype>
class InnerProductLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "InnerProduct"; }
  bool BackwardNeedsTopData() const override { return false; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // Whether the CPU passes run through oneDNN (inner_product_param.engine, above).
  bool uses_onednn() const { return onednn_ != nullptr; }
  bool ComputesIn16Bit() const override;

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
  // The passes in 16 bits, T the type (bfloat16 or float16).
  template <typename T>
  void ForwardGpuAs(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardGpuAs(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);
  std::shared_ptr<ParamCopy> weights_16bit_;
#endif

  int M_ = 0;  // rows: the product of the axes before `axis`
  int K_ = 0;  // inputs per row
  int N_ = 0;  // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob<Dtype> bias_multiplier_;  // a column of ones, for adding the bias with a GEMM
  // Set when the engine picks oneDNN (float only).
  std::shared_ptr<onednn_ip::InnerProduct> onednn_;
  bool bf16_ = false;  // precision: BF16 asked for (oneDNN's bfloat16 where the CPU has it)
};

}  // namespace strata
