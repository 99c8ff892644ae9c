// Reads a convolution_param's window (kernel, stride, pad, dilation) with Caffe's rules, for the layers besides
// Convolution that take one: Deconvolution and Im2col. Like Strata's Convolution, these are 2-D only: the input
// must have exactly two spatial axes after the channel axis.
#pragma once

#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/im2col.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {
namespace conv_window {

// One per-axis setting: either the repeated field (empty: `fallback`; one value: both axes; two: h then w) or
// the _h/_w pair, never both (Caffe's rule).
inline void ReadPair(const google::protobuf::RepeatedField<uint32_t>& values, bool has_hw, uint32_t h, uint32_t w,
                     int fallback, const char* layer, const char* name, int* out_h, int* out_w) {
  if (has_hw) {
    STRATA_REQUIRE(values.empty()) << layer << ": either " << name << " or " << name << "_h/" << name
                                   << "_w should be specified, not both";
    *out_h = static_cast<int>(h);
    *out_w = static_cast<int>(w);
    return;
  }
  STRATA_REQUIRE(values.size() <= 2) << layer << ": " << name
                                     << " must be given once, or once per spatial axis (2), got " << values.size()
                                     << " values";
  *out_h = values.empty() ? fallback : static_cast<int>(values.Get(0));
  *out_w = values.empty() ? fallback : static_cast<int>(values.Get(values.size() - 1));
}

// The channel axis of `bottom` (convolution_param.axis) and the window of `p` into `g` (its channels, height and
// width are the caller's). `layer` names the layer type in messages.
template <typename Dtype>
void Read(const ConvolutionParameter& p, const Blob<Dtype>& bottom, const char* layer, int* channel_axis,
          ConvGeometry* g) {
  STRATA_REQUIRE(p.engine() != ConvolutionParameter::ONEDNN || std::string(layer) == "Convolution" ||
                 std::string(layer) == "Deconvolution")
      << layer << ": convolution_param.engine ONEDNN is for Convolution and Deconvolution only (docs/onednn.md); "
      << "use DEFAULT or CAFFE";
  *channel_axis = bottom.CanonicalAxisIndex(p.axis());
  const int spatial_axes = bottom.num_axes() - *channel_axis - 1;
  STRATA_REQUIRE(spatial_axes == 2) << layer << ": only 2-D windows are supported: input of shape "
                                    << bottom.shape_string() << " has " << spatial_axes
                                    << " spatial axes after the channel axis " << *channel_axis;
  ReadPair(p.kernel_size(), p.has_kernel_h() || p.has_kernel_w(), p.kernel_h(), p.kernel_w(), 0, layer,
           "kernel_size", &g->kernel_h, &g->kernel_w);
  STRATA_REQUIRE(g->kernel_h > 0 && g->kernel_w > 0)
      << layer << ": kernel size must be positive (kernel_size, or kernel_h and kernel_w), got " << g->kernel_h
      << " x " << g->kernel_w;
  ReadPair(p.stride(), p.has_stride_h() || p.has_stride_w(), p.stride_h(), p.stride_w(), 1, layer, "stride",
           &g->stride_h, &g->stride_w);
  STRATA_REQUIRE(g->stride_h > 0 && g->stride_w > 0)
      << layer << ": stride must be positive, got " << g->stride_h << " x " << g->stride_w;
  ReadPair(p.pad(), p.has_pad_h() || p.has_pad_w(), p.pad_h(), p.pad_w(), 0, layer, "pad", &g->pad_h, &g->pad_w);
  ReadPair(p.dilation(), false, 0, 0, 1, layer, "dilation", &g->dilation_h, &g->dilation_w);
  STRATA_REQUIRE(g->dilation_h > 0 && g->dilation_w > 0)
      << layer << ": dilation must be positive, got " << g->dilation_h << " x " << g->dilation_w;
}

// The image shape after the channel axis must still be 2-D with the channel count the layer was set up for.
template <typename Dtype>
void CheckShape(const Blob<Dtype>& bottom, int channel_axis, int channels, const char* layer) {
  STRATA_REQUIRE(bottom.num_axes() == channel_axis + 3)
      << layer << ": input of shape " << bottom.shape_string() << " no longer has 2 spatial axes";
  STRATA_REQUIRE(bottom.shape(channel_axis) == channels)
      << layer << ": input has " << bottom.shape(channel_axis) << " channels (shape " << bottom.shape_string()
      << "), the layer was set up for " << channels;
}

}  // namespace conv_window
}  // namespace strata
