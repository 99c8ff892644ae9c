#include "onednn_convolution.hpp"

#include <unordered_map>
#include <vector>

#include "strata/common.hpp"
#include "strata/math_functions.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn_conv {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

using onednn::AnyDesc;
using onednn::Operand;
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

struct Convolution::Primitives {
  // The plain layouts at the layer's boundary, and the window in oneDNN's terms.
  memory::desc x, w, y, b;
  memory::dims strides, dilates, pad_l, pad_r;
  bool bias = false;
  // What the multiplications read (input, weights, output gradient): f32, or bf16 (Shape::bf16).
  memory::data_type multiply = memory::data_type::f32;

  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Operand fwd_x, fwd_w, fwd_y;
  memory fwd_b;
  size_t forward_bytes = 0;  // of the call buffer (onednn::CallBuffer)

  bool have_backward = false;
  dnnl::convolution_backward_data bwd_data;
  Operand bwd_data_dy, bwd_data_w, bwd_data_dx;
  dnnl::convolution_backward_weights bwd_weights;
  Operand bwd_weights_x, bwd_weights_dy, bwd_weights_dw;
  // Both backward primitives read dy in the same layout: reorder it once per call.
  bool same_dy_layout = false;
  memory bwd_weights_db;
  size_t backward_bytes = 0;
  // The weight and bias gradients of one call, plain, before they are added to the layer's.
  std::vector<float> dw, db;

  void MakeBackward();
};

Convolution::Convolution() = default;
Convolution::~Convolution() = default;

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
  p->bias = shape.bias;
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
    const memory::data_type f32 = memory::data_type::f32;
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, AnyDesc(p->x.dims(), multiply),
        AnyDesc(p->w.dims(), multiply), p->b, AnyDesc(p->y.dims(), f32), p->strides, p->dilates, p->pad_l, p->pad_r);
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
    p->fwd = dnnl::convolution_forward(p->fwd_pd);
    p->fwd_x.Init(p->x, p->fwd_pd.src_desc(), true);
    p->fwd_w.Init(p->w, p->fwd_pd.weights_desc(), true);
    p->fwd_y.Init(p->y, p->fwd_pd.dst_desc(), false);
    if (p->bias) p->fwd_b = memory(p->b, onednn::cpu_engine(), DNNL_MEMORY_NONE);
    p->forward_bytes = p->fwd_x.bytes() + p->fwd_w.bytes() + p->fwd_y.bytes();
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Convolution (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

bool Convolution::bf16() const { return p_ && p_->multiply == memory::data_type::bf16; }

void Convolution::Primitives::MakeBackward() {
  // The gradients (of the input, the weights and the bias) are float, whatever the multiplications read.
  const memory::desc x_any = AnyDesc(x.dims(), multiply), w_any = AnyDesc(w.dims(), multiply),
                     y_any = AnyDesc(y.dims(), multiply), dx_any = AnyDesc(x.dims()), dw_any = AnyDesc(w.dims());
  try {
    const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, dx_any, w_any, y_any,
                                                   strides, dilates, pad_l, pad_r);
    const dnnl::convolution_backward_data::primitive_desc data_pd(dd, onednn::cpu_engine(), fwd_pd);
    bwd_data = dnnl::convolution_backward_data(data_pd);
    bwd_data_dy.Init(y, data_pd.diff_dst_desc(), true);
    bwd_data_w.Init(w, data_pd.weights_desc(), true);
    bwd_data_dx.Init(x, data_pd.diff_src_desc(), false);

    const dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, x_any, dw_any, b, y_any,
                                                      strides, dilates, pad_l, pad_r);
    const dnnl::convolution_backward_weights::primitive_desc weights_pd(wd, onednn::cpu_engine(), fwd_pd);
    bwd_weights = dnnl::convolution_backward_weights(weights_pd);
    bwd_weights_x.Init(x, weights_pd.src_desc(), true);
    bwd_weights_dy.Init(y, weights_pd.diff_dst_desc(), true);
    same_dy_layout = weights_pd.diff_dst_desc() == data_pd.diff_dst_desc();
    bwd_weights_dw.Init(w, weights_pd.diff_weights_desc(), false);
    if (bias) bwd_weights_db = memory(b, onednn::cpu_engine(), DNNL_MEMORY_NONE);
    backward_bytes = bwd_weights_x.bytes() + bwd_weights_dy.bytes() + bwd_weights_dw.bytes() +
                     (same_dy_layout ? 0 : bwd_data_dy.bytes()) + bwd_data_w.bytes() + bwd_data_dx.bytes();
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Convolution (engine ONEDNN): creating the backward primitives");
  }
  dw.resize(w.get_size() / sizeof(float));
  db.resize(bias ? b.get_size() / sizeof(float) : 0);
  have_backward = true;
}

void Convolution::Forward(const float* x, const float* w, const float* b, float* y) {
  CHECK(p_) << "Configure before Forward";
  Primitives& p = *p_;
  dnnl::stream& s = onednn::cpu_stream();
  onednn::CallBuffer buffer(p.forward_bytes);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.fwd_x.In(x, buffer)},
                                       {DNNL_ARG_WEIGHTS, p.fwd_w.In(w, buffer)},
                                       {DNNL_ARG_DST, p.fwd_y.Target(y, buffer)}};
  if (p.bias) {
    p.fwd_b.set_data_handle(const_cast<float*>(b));
    args.emplace(DNNL_ARG_BIAS, p.fwd_b);
  }
  p.fwd.execute(s, args);
  p.fwd_y.Out();
  s.wait();
}

void Convolution::Backward(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db) {
  CHECK(p_) << "Configure before Backward";
  Primitives& p = *p_;
  if (!p.have_backward) p.MakeBackward();
  dnnl::stream& s = onednn::cpu_stream();
  onednn::CallBuffer buffer(p.backward_bytes);
  const memory* dy_weights = nullptr;  // dy as the weight gradient read it
  if (dw || db) {
    dy_weights = &p.bwd_weights_dy.In(dy, buffer);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.bwd_weights_x.In(x, buffer)},
                                         {DNNL_ARG_DIFF_DST, *dy_weights},
                                         {DNNL_ARG_DIFF_WEIGHTS, p.bwd_weights_dw.Target(p.dw.data(), buffer)}};
    if (p.bias) {
      p.bwd_weights_db.set_data_handle(p.db.data());
      args.emplace(DNNL_ARG_DIFF_BIAS, p.bwd_weights_db);
    }
    p.bwd_weights.execute(s, args);
    p.bwd_weights_dw.Out();
    s.wait();
    // oneDNN overwrites its outputs; Strata's parameter gradients accumulate (iter_size, several bottoms).
    if (dw) cpu_axpy<float>(static_cast<int>(p.dw.size()), 1.f, p.dw.data(), dw);
    if (db) cpu_axpy<float>(static_cast<int>(p.db.size()), 1.f, p.db.data(), db);
  }
  if (dx) {
    const memory& dy_data = dy_weights && p.same_dy_layout ? *dy_weights : p.bwd_data_dy.In(dy, buffer);
    p.bwd_data.execute(s, {{DNNL_ARG_DIFF_DST, dy_data},
                           {DNNL_ARG_WEIGHTS, p.bwd_data_w.In(w, buffer)},
                           {DNNL_ARG_DIFF_SRC, p.bwd_data_dx.Target(dx, buffer)}});
    p.bwd_data_dx.Out();
    s.wait();
  }
}

}  // namespace onednn_conv
}  // namespace strata
