// cuDNN's description of one 2-D convolution y = conv(x, w) and the algorithms chosen for its shape, for the
// layers that run convolutions through cuDNN in either direction: Deconvolution runs its forward as the
// convolution's backward-data, its backward-data as the convolution's forward and its weight gradient as the
// convolution's backward-filter (x and y swapped in meaning, not in the call).
//
// The algorithm for each direction is chosen by measurement, as Convolution does: cuDNN runs every algorithm on
// the shape once, and the fastest whose workspace fits gpu_options().workspace_limit (and, with
// gpu_options().deterministic, whose result does not depend on scheduling) is kept, cached process-wide by shape.
// Without TF32 the math is restricted to FMA, so results agree with the CPU's to float rounding.
#pragma once

#ifdef STRATA_USE_CUDNN

#include <string>

#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
#include "strata/im2col.hpp"
#include "strata/memory_format.hpp"

namespace strata {
namespace cudnn_conv {

struct Algorithms {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
  size_t fwd_bytes, bwd_data_bytes, bwd_filter_bytes;
};

struct Convolution {
  // x: num x channels x height x width; y: num x num_output x out_h x out_w; w: num_output x channels/group x
  // kernel; x_bias and y_bias: 1 x (x's or y's channels) x 1 x 1, for a bias added to either side.
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, x_bias = nullptr, y_bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // One per direction, since each may run with its own math type.
  cudnnConvolutionDescriptor_t fwd = nullptr, bwd_data = nullptr, bwd_filter = nullptr;
  Algorithms algo{};
  std::string key;  // the shape the descriptors describe
  bool warned_channels_first = false;  // configure_pass has named its layer once

  Convolution();
  ~Convolution();
  Convolution(const Convolution&) = delete;
  Convolution& operator=(const Convolution&) = delete;
};

// Describes the convolution of `num` images of g.channels x g.height x g.width into num_output channels of
// g.out_h() x g.out_w() in `group` groups, and finds (or recalls) its algorithms. Does nothing when the shape is
// the one already described. With a 16-bit `stored` (float only) x, w and y are bfloat16 or float16 and the
// products are summed in float on tensor cores (cuDNN's pseudo-bfloat16 and pseudo-half configurations); the bias
// descriptors stay float. With
// `channels_last` (float nets) x and y are NHWC and w is KRSC (ParamCopy's channels-last copy), and the result is
// false where cuDNN has no such algorithm for a direction within the limits (the caller computes channels-first);
// channels-first, that is an Error naming the shape.
template <typename Dtype>
bool configure(Convolution* c, const ConvGeometry& g, int num, int num_output, int group,
               ElementType stored = ElementType::kOwn, bool channels_last = false);

// configure for a layer's pass in *order (a DeviceFormat: its element type and order): where cuDNN has no
// channels-last algorithm for the shape, the pass computes channels-first (*order becomes the element type's plain
// format), and the first time a warning names the layer.
template <typename Dtype>
void configure_pass(Convolution* c, const ConvGeometry& g, int num, int num_output, int group, DeviceFormat* order,
                    const std::string& layer_name, const char* layer_type);

}  // namespace cudnn_conv
}  // namespace strata

#endif  // STRATA_USE_CUDNN
