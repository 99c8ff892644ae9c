#include "onednn_convolution.hpp"

#include "onednn_weighted.hpp"
#include "strata/common.hpp"

namespace strata {
namespace onednn_conv {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

using onednn::AnyDesc;
using onednn::PlainDesc;

}  // namespace

bool Shape::operator==(const Shape& o) const {
  const ConvGeometry& a = geom;
  const ConvGeometry& b = o.geom;
  return num == o.num && num_output == o.num_output && group == o.group && bias == o.bias &&
         a.channels == b.channels && a.height == b.height && a.width == b.width && a.kernel_h == b.kernel_h &&
         a.kernel_w == b.kernel_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && bf16 == o.bf16;
}

struct Convolution::Primitives : onednn::WeightedPrimitives {
  // The window in oneDNN's terms.
  memory::dims strides, dilates, pad_l, pad_r;
  dnnl::convolution_forward::primitive_desc fwd_pd;

};

void Convolution::Configure(const Shape& shape) {
  if (p_ && shape == shape_) return;
  p_.reset();
  shape_ = shape;
  const ConvGeometry& g = shape.geom;
  auto p = std::make_unique<Primitives>();
  const memory::dim N = shape.num, C = g.channels, O = shape.num_output, G = shape.group;
  p->x = PlainDesc({N, C, g.height, g.width}, Tag::nchw);
  p->y = PlainDesc({N, O, g.out_h(), g.out_w()}, Tag::nchw);
  // Strata's weights, O x C/G x KH x KW, are oneDNN's goihw read as G x O/G x C/G x KH x KW.
  p->w = G == 1 ? PlainDesc({O, C, g.kernel_h, g.kernel_w}, Tag::oihw)
                : PlainDesc({G, O / G, C / G, g.kernel_h, g.kernel_w}, Tag::goihw);
  p->b = shape.bias ? PlainDesc({O}, Tag::x) : memory::desc();
  p->strides = {g.stride_h, g.stride_w};
  p->dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps: 0 is a dense window
  // Caffe pads both sides alike; with the right padding equal to the left, oneDNN's output size (rounded down)
  // is Caffe's.
  p->pad_l = {g.pad_h, g.pad_w};
  p->pad_r = {g.pad_h, g.pad_w};
  // The layouts are oneDNN's choice ("any"): on plain NCHW it falls back to a reference kernel, 35 times slower
  // on CIFAR-10 quick's convolutions than its blocked kernels with the reorders (docs/onednn.md).
  const auto make_forward = [&p](memory::data_type multiply) {
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, AnyDesc(p->x.dims(), multiply),
        AnyDesc(p->w.dims(), multiply), p->b, AnyDesc(p->y.dims()), p->strides, p->dilates, p->pad_l, p->pad_r);
    p->fwd_pd = dnnl::convolution_forward::primitive_desc(d, onednn::cpu_engine());
    p->multiply = multiply;
  };
  try {
    if (shape.bf16) {
      try {
        make_forward(memory::data_type::bf16);
      } catch (const dnnl::error& e) {
        // No bfloat16 kernels on this CPU (before AVX-512): float, as the precision's definition allows.
        if (e.status != dnnl_unimplemented) throw;
        LOG_FIRST_N(INFO, 1) << "oneDNN has no bfloat16 convolution on this CPU: convolutions compute in float";
      }
    }
    if (p->multiply == memory::data_type::f32) make_forward(memory::data_type::f32);
    p->InitForward(p->fwd_pd);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Convolution (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

void Convolution::MakeBackward() {
  Primitives& p = static_cast<Primitives&>(*p_);
  // The gradients (of the input, the weights and the bias) are float, whatever the multiplications read.
  const memory::desc x_any = AnyDesc(p.x.dims(), p.multiply), w_any = AnyDesc(p.w.dims(), p.multiply),
                     y_any = AnyDesc(p.y.dims(), p.multiply), dx_any = AnyDesc(p.x.dims()),
                     dw_any = AnyDesc(p.w.dims());
  try {
    const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, dx_any, w_any, y_any,
                                                   p.strides, p.dilates, p.pad_l, p.pad_r);
    const dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, x_any, dw_any, p.b,
                                                      y_any, p.strides, p.dilates, p.pad_l, p.pad_r);
    p.InitBackward(dnnl::convolution_backward_data::primitive_desc(dd, onednn::cpu_engine(), p.fwd_pd),
                   dnnl::convolution_backward_weights::primitive_desc(wd, onednn::cpu_engine(), p.fwd_pd));
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Convolution (engine ONEDNN): creating the backward primitives");
  }
}

}  // namespace onednn_conv
}  // namespace strata
