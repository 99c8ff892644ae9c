#pragma once

#include <memory>

#include "strata/im2col.hpp"
#include "strata/layer.hpp"
#include "strata/layers/relu_layer.hpp"

namespace strata {

#ifdef STRATA_USE_CUDNN
class ParamCopy;  // a parameter's copy in a device format (src/strata/layers/device_storage.cuh)
namespace cudnn_conv {
// cuDNN's descriptors and the algorithms chosen for the current shape (src/strata/layers/cudnn_convolution.cuh).
struct Convolution;
}  // namespace cudnn_conv
#endif
namespace onednn_conv {
// oneDNN's primitives for the current shape (src/strata/layers/onednn_convolution.hpp).
class Convolution;
}  // namespace onednn_conv

// 2-D convolution (Caffe's "Convolution"): weights num_output x (C/group) x kernel_h x kernel_w, optional bias
// of num_output; pad, stride, dilation and groups per Caffe's convolution_param. Each bottom gets its own top,
// all through the same weights.
//
// Where one image's output is small, several images are unfolded side by side (im2col) into one column matrix
// in the shared column workspace, enough for a GEMM of a few hundred columns while the matrix stays cache-sized,
// and each group is one GEMM over all of them; the result is scattered back to N x C x H x W with the bias
// added on the way. Larger images take one GEMM each, written straight into the top. A 1x1, stride-1, unpadded
// convolution over large enough images multiplies the input directly, with no unfolding. With several compute
// threads the batch is split into one contiguous range of images per thread (each unfolding and multiplying its
// own images), which scales far better than splitting the small GEMMs of small images.
//
// On the CPU, convolution_param.engine picks who computes: CAFFE the path above (the reference), ONEDNN oneDNN
// (float only), DEFAULT oneDNN in float (measured faster: docs/onednn.md) and the path above in double. CUDNN
// means the path above on the CPU; on the GPU, cuDNN serves every engine when Strata is built with it.
template <typename Dtype>
class ConvolutionLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Convolution"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  // The weight gradient needs the input; nothing needs the output.
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }

  // The shape as of the last Reshape (K-FAC reads its patches with it).
  const ConvGeometry& geometry() const { return geom_; }
  int channel_axis() const { return channel_axis_; }
  int num_output() const { return num_output_; }
  int group() const { return group_; }
  bool bias_term() const { return bias_term_; }
  // Whether the CPU passes run through oneDNN (convolution_param.engine, above).
  bool uses_onednn() const { return onednn_ != nullptr; }
  bool ComputesIn16Bit() const override;
  typename Layer<Dtype>::GpuOrder GpuActivationOrder() const override;
  // On oneDNN: its kernels read and write the channel-blocked layout themselves.
  bool AcceptsBlockedBottoms() const override;
  // On the oneDNN engine, absorbs (Layer::Absorb) the forward of a ReLU without slope in place after it: the
  // forward primitive applies it as a post-op (on the GPU, a kernel after cuDNN's forward). The ReLU's backward
  // runs in its own slot, as it would here.
  bool Absorb(Layer<Dtype>& next) override;
  bool AbsorbsBackward() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDNN
  // On the GPU through cuDNN, with the fastest algorithm measured once per shape (see convolution_layer.cu); in
  // 16 bits with GpuPrecision().
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
  // cuDNN's description of the current shape in the device format *order asked for (format_for_images), made on
  // first use; where cuDNN has no channels-last algorithm for the shape, *order becomes channels-first (said once).
  const cudnn_conv::Convolution& Cudnn(DeviceFormat* order);
  // The passes in bfloat16 or channels-last (f, described by c), the weights through their copy in f.
  void ForwardGpuConverted(const BlobVec& bottom, const BlobVec& top, const cudnn_conv::Convolution& c,
                           DeviceFormat f);
  void BackwardGpuConverted(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom,
                            const cudnn_conv::Convolution& c, DeviceFormat f);
#endif

 private:
  // The column matrix of images [n0, n0 + count) of `x`: the input itself on the direct 1x1 path, else unfolded
  // into `col`.
  const Dtype* Columns(const Dtype* x, int n0, int count, Dtype* col) const;
  // How many threads share the batch (1: the GEMMs themselves may still be split across threads).
  int Teams() const;
  void SyncParams();
  // Runs fn(thread, first image, end image) on `teams` threads over contiguous image ranges.
  template <typename RangeFn>
  void ForEachTeam(int teams, RangeFn fn) const;
  void ForwardImages(const Dtype* x, Dtype* y, int n_begin, int n_end) const;
  // Accumulates into dw and db (either may be null) and writes dx (may be null) for images [n_begin, n_end).
  void BackwardImages(const Dtype* dy, const Dtype* x, Dtype* dx, Dtype* dw, Dtype* db, int n_begin,
                      int n_end) const;

  ConvGeometry geom_;      // of one image, all channels
  int channel_axis_ = 1;
  int num_ = 0;            // images: the product of the axes before the channel axis
  int num_output_ = 0;
  int group_ = 1;
  int out_count_ = 0;      // out_h * out_w
  int col_rows_g_ = 0;     // rows of one group's column matrix: (C/group) * kernel_h * kernel_w
  int chunk_ = 1;          // images per GEMM
  bool bias_term_ = true;
  bool direct_ = false;    // 1x1 stride-1 unpadded and large enough: multiply the input without unfolding
  Blob<Dtype> bias_multiplier_;  // ones, chunk_ * out_count_ of them
  Blob<Dtype> partials_;         // parameter gradients of threads 1.. while they share the batch
#ifdef STRATA_USE_CUDNN
  std::shared_ptr<cudnn_conv::Convolution> cudnn_;
  std::shared_ptr<ParamCopy> weights_copy_;  // in bfloat16 or channels-last on the GPU: the weights' copy
  Blob<float> weight_diff_copy_;             // and the weight gradient before it is added to the float one
#endif
  // Set when the CPU passes run through oneDNN; its primitives follow the shape (configured in Reshape).
  std::shared_ptr<onednn_conv::Convolution> onednn_;
  bool bf16_ = false;  // precision BF16 asked for (in float)
  ReLULayer<Dtype>* relu_ = nullptr;  // absorbed
};

}  // namespace strata
