#include "onednn_convolution.hpp"

#include <string>
#include <utility>

#include "onednn_weighted.hpp"
#include "strata/common.hpp"
#include "strata/memory_format.hpp"
#include "strata/util/flag_parsing.hpp"

namespace strata {
namespace onednn_conv {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

using onednn::AnyDesc;
using onednn::PlainDesc;

// Whether the activations of a convolution with these channel counts per group go in NHWC rather than in the
// layout oneDNN prefers. Its preferred kernels block channels by 16 and pad the rest with zeros, which costs
// LeNet's conv2 (20 -> 50 channels, computed as 32 -> 64) twice the arithmetic; on NHWC oneDNN runs kernels that
// mask the last partial block instead (brgconv forward), 1.4-1.5x faster there (docs/onednn.md). Inputs of fewer
// than 16 channels (a first layer's 1 or 3) keep oneDNN's choice: its kernel for those reads plain NCHW.
// STRATA_CONV_NHWC=0 keeps oneDNN's choice everywhere (the before/after measurement).
bool Nhwc(memory::dim in_per_group, memory::dim out_per_group) {
  static const bool enabled = EnvSwitchOn("STRATA_CONV_NHWC");
  return enabled && in_per_group >= kChannelBlock16 &&
         (in_per_group % kChannelBlock16 != 0 || out_per_group % kChannelBlock16 != 0);
}

using onednn::IsReference;

// Whether `pd`, made for bfloat16 multiplications, runs a kernel slower than float's: oneDNN's reference loops or
// its GEMM-based convolution (which converts the operands around a float GEMM).
bool SlowInBf16(const dnnl::primitive_desc& pd) {
  return IsReference(pd) || std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
}

// An activation's descriptor for the primitives: NHWC where `nhwc`, else oneDNN's choice.
memory::desc ActivationDesc(const memory::dims& dims, bool nhwc, memory::data_type type = memory::data_type::f32) {
  return nhwc ? memory::desc(dims, type, Tag::nhwc) : AnyDesc(dims, type);
}

}  // namespace

bool Shape::operator==(const Shape& o) const {
  const ConvGeometry& a = geom;
  const ConvGeometry& b = o.geom;
  return num == o.num && num_output == o.num_output && group == o.group && bias == o.bias &&
         a.channels == b.channels && a.height == b.height && a.width == b.width && a.kernel_h == b.kernel_h &&
         a.kernel_w == b.kernel_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w && bf16 == o.bf16 &&
         transposed == o.transposed && relu == o.relu;
}

struct Convolution::Primitives : onednn::WeightedPrimitives {
  // The window in oneDNN's terms.
  memory::dims strides, dilates, pad_l, pad_r;
  bool nhwc = false;  // activations in NHWC (Nhwc above), else in oneDNN's preferred layout
  bool transposed = false;  // oneDNN's deconvolution primitives (Shape::transposed)
  dnnl::primitive_attr attr;  // the forward's: a ReLU post-op (Shape::relu), or none
  dnnl::convolution_forward::primitive_desc conv_pd;
  dnnl::deconvolution_forward::primitive_desc deconv_pd;

  const dnnl::primitive_desc& fwd_pd() const {
    return transposed ? static_cast<const dnnl::primitive_desc&>(deconv_pd) : conv_pd;
  }
  // The forward primitive descriptor, multiplying in `type`; in the preferred layouts where NHWC has only a
  // reference kernel.
  void MakeForward(memory::data_type type);
  // The backward primitive descriptors (data, weights) that go with it.
  std::pair<dnnl::primitive_desc, dnnl::primitive_desc> BackwardDescs() const;
};

void Convolution::Configure(const Shape& shape) {
  if (p_ && shape == shape_) return;
  p_.reset();
  shape_ = shape;
  const ConvGeometry& g = shape.geom;
  auto p = std::make_unique<Primitives>();
  const memory::dim N = shape.num, C = g.channels, O = shape.num_output, G = shape.group;
  const memory::dims conv_in{N, C, g.height, g.width}, conv_out{N, O, g.out_h(), g.out_w()};
  p->transposed = shape.transposed;
  if (shape.relu) {
    dnnl::post_ops relu;
    relu.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    p->attr.set_post_ops(relu);
  }
  p->x = PlainDesc(shape.transposed ? conv_out : conv_in, Tag::nchw);
  p->y = PlainDesc(shape.transposed ? conv_in : conv_out, Tag::nchw);
  if (!shape.transposed) {
    // Strata's weights, O x C/G x KH x KW, are oneDNN's goihw read as G x O/G x C/G x KH x KW.
    p->w = G == 1 ? PlainDesc({O, C, g.kernel_h, g.kernel_w}, Tag::oihw)
                  : PlainDesc({G, O / G, C / G, g.kernel_h, g.kernel_w}, Tag::goihw);
  } else {
    // The same memory is the deconvolution's weights (its outputs C, its inputs O) with the input channels
    // outermost: giohw read as G x C/G x O/G x KH x KW.
    p->w = G == 1 ? PlainDesc({C, O, g.kernel_h, g.kernel_w}, Tag::iohw)
                  : PlainDesc({G, C / G, O / G, g.kernel_h, g.kernel_w}, Tag::giohw);
  }
  p->b = shape.bias ? PlainDesc({shape.transposed ? C : O}, Tag::x) : memory::desc();
  p->strides = {g.stride_h, g.stride_w};
  p->dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps: 0 is a dense window
  // Caffe pads both sides alike; with the right padding equal to the left, oneDNN's output size (rounded down)
  // is Caffe's.
  p->pad_l = {g.pad_h, g.pad_w};
  p->pad_r = {g.pad_h, g.pad_w};
  p->nhwc = shape.transposed ? Nhwc(O / G, C / G) : Nhwc(C / G, O / G);
  try {
    if (shape.bf16) {
      try {
        p->MakeForward(memory::data_type::bf16);
        // bfloat16 only where oneDNN has bfloat16 kernels of its own for all three passes: its GEMM-based
        // fallback converts around a float GEMM and is slower than float (LeNet's conv1, one input channel: the
        // weight gradient took 3.4-4 ms in bfloat16 against 0.65 ms in float).
        const auto backward = p->BackwardDescs();
        if (SlowInBf16(p->fwd_pd()) || SlowInBf16(backward.first) || SlowInBf16(backward.second)) {
          p->multiply = memory::data_type::f32;
        }
      } catch (const dnnl::error& e) {
        // No bfloat16 kernels on this CPU (before AVX-512): float, as the precision's definition allows.
        if (e.status != dnnl_unimplemented) throw;
        LOG_FIRST_N(INFO, 1) << "oneDNN has no bfloat16 convolution on this CPU: convolutions compute in float";
      }
    }
    if (p->multiply == memory::data_type::f32) p->MakeForward(memory::data_type::f32);
    p->InitForward(p->fwd_pd());
  } catch (const dnnl::error& e) {
    onednn::Fail(e, std::string(shape.transposed ? "Deconvolution" : "Convolution") +
                        " (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

void Convolution::Primitives::MakeForward(memory::data_type type) {
  // Otherwise the layouts are oneDNN's choice ("any"): on plain NCHW it falls back to a reference kernel, 35 times
  // slower on CIFAR-10 quick's convolutions than its blocked kernels with the reorders (docs/onednn.md).
  const auto make = [&] {
    const memory::desc x_desc = ActivationDesc(x.dims(), nhwc, type), w_desc = AnyDesc(w.dims(), type),
                       y_desc = ActivationDesc(y.dims(), nhwc);
    if (transposed) {
      const dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_training,
                                                dnnl::algorithm::deconvolution_direct, x_desc, w_desc, b, y_desc,
                                                strides, dilates, pad_l, pad_r);
      deconv_pd = dnnl::deconvolution_forward::primitive_desc(d, attr, onednn::cpu_engine());
    } else {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              x_desc, w_desc, b, y_desc, strides, dilates, pad_l, pad_r);
      conv_pd = dnnl::convolution_forward::primitive_desc(d, attr, onednn::cpu_engine());
    }
  };
  make();
  if (nhwc && IsReference(fwd_pd())) {  // no optimised NHWC kernel for this window: the preferred layout
    nhwc = false;
    make();
  }
  multiply = type;
}

std::pair<dnnl::primitive_desc, dnnl::primitive_desc> Convolution::Primitives::BackwardDescs() const {
  // The gradients (of the input, the weights and the bias) are float, whatever the multiplications read.
  const memory::desc x_any = ActivationDesc(x.dims(), nhwc, multiply), w_any = AnyDesc(w.dims(), multiply),
                     y_any = ActivationDesc(y.dims(), nhwc, multiply), dx_any = ActivationDesc(x.dims(), nhwc),
                     dw_any = AnyDesc(w.dims());
  if (transposed) {
    const dnnl::deconvolution_backward_data::desc dd(dnnl::algorithm::deconvolution_direct, dx_any, w_any, y_any,
                                                     strides, dilates, pad_l, pad_r);
    const dnnl::deconvolution_backward_weights::desc wd(dnnl::algorithm::deconvolution_direct, x_any, dw_any, b,
                                                        y_any, strides, dilates, pad_l, pad_r);
    return {dnnl::deconvolution_backward_data::primitive_desc(dd, onednn::cpu_engine(), deconv_pd),
            dnnl::deconvolution_backward_weights::primitive_desc(wd, onednn::cpu_engine(), deconv_pd)};
  }
  const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, dx_any, w_any, y_any, strides,
                                                 dilates, pad_l, pad_r);
  const dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, x_any, dw_any, b, y_any,
                                                    strides, dilates, pad_l, pad_r);
  return {dnnl::convolution_backward_data::primitive_desc(dd, onednn::cpu_engine(), conv_pd),
          dnnl::convolution_backward_weights::primitive_desc(wd, onednn::cpu_engine(), conv_pd)};
}

void Convolution::MakeBackward() {
  Primitives& p = static_cast<Primitives&>(*p_);
  try {
    auto pds = p.BackwardDescs();
    if (p.nhwc && (IsReference(pds.first) || IsReference(pds.second))) {
      // No optimised NHWC kernel for a backward pass: all three passes in the preferred layouts.
      p.nhwc = false;
      p.MakeForward(p.multiply);
      p.InitForward(p.fwd_pd());
      pds = p.BackwardDescs();
    }
    p.InitBackward(pds.first, pds.second);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, std::string(p.transposed ? "Deconvolution" : "Convolution") +
                        " (engine ONEDNN): creating the backward primitives");
  }
}

namespace {

// The weights where the engine reads them: in its weights_layout() if it has one (converted in place once, then
// kept so by the solver), else plain.
const float* Weights(Convolution& engine, Layer<float>& layer, CustomFormatPtr* layout) {
  *layout = engine.weights_layout();
  Blob<float>& w = *layer.blobs()[0];
  return *layout ? w.cpu_data_as(*layout) : w.cpu_data();
}

}  // namespace

void ForwardEach(Convolution& engine, Layer<float>& layer, bool bias, const std::vector<Blob<float>*>& bottom,
                 const std::vector<Blob<float>*>& top) {
  // A training net's layer makes its backward primitives now: its weights take their layout from the first pass.
  if (layer.phase() == TRAIN && param_layouts_enabled()) engine.PrepareBackward();
  CustomFormatPtr w_layout;
  const float* w = Weights(engine, layer, &w_layout);
  const float* b = bias ? layer.blobs()[1]->cpu_data() : nullptr;
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (bottom[i]->count() == 0) continue;
    const bool x_blocked = bottom[i]->data_layout() == MemoryFormat::kBlocked16;
    const bool y_blocked =
        layer.top_may_block(static_cast<int>(i)) && top[i]->can_block() && engine.writes_blocked_output();
    engine.Forward(bottom[i]->cpu_data_in(bottom[i]->data_layout()), w, b,
                   top[i]->mutable_cpu_data_in(y_blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain, false),
                   {x_blocked, y_blocked, w_layout != nullptr});
  }
}

void BackwardEach(Convolution& engine, Layer<float>& layer, const std::vector<Blob<float>*>& top,
                  const std::vector<bool>& propagate_down, const std::vector<Blob<float>*>& bottom, bool weight_grad,
                  float* db) {
  engine.PrepareBackward();
  CustomFormatPtr w_layout;
  const float* w = Weights(engine, layer, &w_layout);
  Blob<float>& weights = *layer.blobs()[0];
  // The gradient accumulates in the weights' layout.
  float* dw = !weight_grad ? nullptr : w_layout ? weights.mutable_cpu_diff_as(w_layout) : weights.mutable_cpu_diff();
  for (size_t i = 0; i < top.size(); ++i) {
    if (bottom[i]->count() == 0 || (!dw && !db && !propagate_down[i])) continue;
    // The gradients in their data's layouts (the layers reading the top wrote its gradient so).
    const MemoryFormat x_layout = bottom[i]->data_layout(), dy_layout = top[i]->diff_layout();
    engine.Backward(top[i]->cpu_diff_in(dy_layout), bottom[i]->cpu_data_in(x_layout), w,
                    propagate_down[i] ? bottom[i]->mutable_cpu_diff_in(x_layout, false) : nullptr, dw, db,
                    {x_layout == MemoryFormat::kBlocked16, dy_layout == MemoryFormat::kBlocked16, w_layout != nullptr});
  }
}

}  // namespace onednn_conv
}  // namespace strata
