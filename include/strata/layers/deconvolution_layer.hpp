#pragma once

#include <memory>

#include "strata/im2col.hpp"
#include "strata/layer.hpp"

namespace strata {

namespace onednn_conv {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_convolution.hpp).
class Convolution;
}  // namespace onednn_conv

#ifdef STRATA_USE_CUDNN
class ParamCopy;  // a parameter's copy in a device format (src/strata/layers/device_storage.cuh)
namespace cudnn_conv {
// cuDNN's descriptors of a convolution and its chosen algorithms (src/strata/layers/cudnn_convolution.cuh).
struct Convolution;
}  // namespace cudnn_conv
#endif

// 2-D deconvolution (Caffe's "Deconvolution"): the transpose of Convolution with the same convolution_param.
// Forward is a convolution's backward-data, backward-data is a convolution's forward, and the weight gradient is
// a convolution's weight gradient with the roles of input and output swapped. Weights are
// C_in x (num_output/group) x kernel_h x kernel_w (Caffe's layout: the weights of the convolution from the top
// back to the bottom), with an optional bias of num_output. The top's spatial size is
// stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad. Each bottom gets its own top, all through the same
// weights. The "bilinear" weight filler gives FCN's up-sampling kernels (group = channels = num_output).
//
// On the CPU, convolution_param.engine chooses as for Convolution: oneDNN's deconvolution primitives (ONEDNN, and
// DEFAULT in float; bfloat16 with precision: BF16; activations kept channel-blocked where the net allows), or
// CAFFE, the reference: one image at a time, a GEMM into the column matrix and col2im onto the top (forward),
// im2col of the top gradient and GEMMs for the weight and bottom gradients (backward). On the GPU through cuDNN's
// convolution routines with the same algorithm choice as Convolution.
template <typename Dtype>
class DeconvolutionLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Deconvolution"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  // The weight gradient needs the input; nothing needs the output.
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }
  // The oneDNN engine reads and writes the channel-blocked layout.
  bool AcceptsBlockedBottoms() const override;
  bool ComputesIn16Bit() const override;
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override;
  bool uses_onednn() const { return onednn_ != nullptr; }

  // The convolution this layer transposes, over one top image: channels num_output, the top's height and width,
  // and its out_h() x out_w() is the bottom's spatial size.
  const ConvGeometry& geometry() const { return geom_; }
  int num_output() const { return num_output_; }
  int group() const { return group_; }
  bool bias_term() const { return bias_term_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDNN
  // In 16 bits with Layer::GpuPrecision, and channels-last, as Convolution's passes.
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  ConvGeometry geom_;   // the transposed convolution, over the top (see geometry())
  int channel_axis_ = 1;
  int num_ = 0;         // images: the product of the axes before the channel axis
  int channels_ = 0;    // the bottom's channels (the transposed convolution's outputs)
  int num_output_ = 0;  // the top's channels
  int group_ = 1;
  bool bias_term_ = true;
  bool bf16_ = false;  // precision: BF16 asked for (oneDNN's bfloat16 where the CPU has it)
  std::shared_ptr<onednn_conv::Convolution> onednn_;  // null: the CAFFE path
#ifdef STRATA_USE_CUDNN
  // cuDNN's description of the current shape in the device format *order asked for (format_for_images), made on
  // first use; where cuDNN has no channels-last algorithm for the shape, *order becomes channels-first (said once).
  const cudnn_conv::Convolution& Cudnn(DeviceFormat* order);
  std::shared_ptr<cudnn_conv::Convolution> cudnn_;
  std::shared_ptr<ParamCopy> weights_copy_;  // in bfloat16 or channels-last on the GPU: the weights' copy
  Blob<float> weight_diff_copy_;             // and the weight gradient before it is added to the float one
#endif
};

}  // namespace strata
