#include "onednn_convolution.hpp"

#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "strata/onednn_context.hpp"
#include "strata/common.hpp"
#include "strata/math_functions.hpp"

namespace strata {
namespace onednn_conv {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Whether oneDNN may compute in layouts of its own choice (blocked channels) behind reorders, or must work on the
// plain layouts directly. docs/benchmarks.md ("oneDNN CPU engine") has the measurement that chose it.
bool LetOneDnnChooseLayouts() {
  static const bool choose = [] {
    const char* v = std::getenv("STRATA_ONEDNN_LAYOUT");
    return !(v && std::strcmp(v, "plain") == 0);
  }();
  return choose;
}

// One tensor of a primitive: `user` is the layer's plain memory (its pointer set on every call), `inner` the
// memory in the layout the primitive computes in. When oneDNN chose the plain layout they are the same memory
// and nothing is copied; otherwise `inner` is a buffer of its own, filled from `user` (an input) or copied back
// to it (an output) by a reorder made once.
struct Operand {
  memory user, inner;
  dnnl::reorder copy;
  bool reordered = false;

  void Init(const memory::desc& plain, const memory::desc& chosen, bool input) {
    dnnl::engine& e = onednn::cpu_engine();
    user = memory(plain, e, DNNL_MEMORY_NONE);
    reordered = chosen != plain;
    if (!reordered) {
      inner = user;
      return;
    }
    inner = memory(chosen, e);
    copy = input ? dnnl::reorder(user, inner) : dnnl::reorder(inner, user);
  }
  // The input at `data`, in the primitive's layout.
  const memory& In(const float* data) {
    user.set_data_handle(const_cast<float*>(data));
    if (reordered) copy.execute(onednn::cpu_stream(), user, inner);
    return inner;
  }
  // Where the primitive writes an output bound for `data`; Out() then brings it there.
  const memory& Target(float* data) {
    user.set_data_handle(data);
    return inner;
  }
  void Out() {
    if (reordered) copy.execute(onednn::cpu_stream(), inner, user);
  }
};

memory::desc Plain(const memory::dims& dims, Tag tag) { return memory::desc(dims, memory::data_type::f32, tag); }
memory::desc Any(const memory::dims& dims) { return memory::desc(dims, memory::data_type::f32, Tag::any); }

}  // namespace

bool Shape::operator==(const Shape& o) const {
  const ConvGeometry& a = geom;
  const ConvGeometry& b = o.geom;
  return num == o.num && num_output == o.num_output && group == o.group && bias == o.bias &&
         a.channels == b.channels && a.height == b.height && a.width == b.width && a.kernel_h == b.kernel_h &&
         a.kernel_w == b.kernel_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w;
}

struct Convolution::Primitives {
  // The plain layouts at the layer's boundary, and the window in oneDNN's terms.
  memory::desc x, w, y, b;
  memory::dims strides, dilates, pad_l, pad_r;
  bool bias = false;

  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Operand fwd_x, fwd_w, fwd_y;
  memory fwd_b;

  bool have_backward = false;
  dnnl::convolution_backward_data bwd_data;
  Operand bwd_data_dy, bwd_data_w, bwd_data_dx;
  dnnl::convolution_backward_weights bwd_weights;
  Operand bwd_weights_x, bwd_weights_dy, bwd_weights_dw;
  memory bwd_weights_db;
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
  p->x = Plain({N, C, g.height, g.width}, Tag::nchw);
  p->y = Plain({N, O, g.out_h(), g.out_w()}, Tag::nchw);
  // Strata's weights, O x C/G x KH x KW, are oneDNN's goihw read as G x O/G x C/G x KH x KW.
  p->w = G == 1 ? Plain({O, C, g.kernel_h, g.kernel_w}, Tag::oihw)
                : Plain({G, O / G, C / G, g.kernel_h, g.kernel_w}, Tag::goihw);
  p->bias = shape.bias;
  p->b = shape.bias ? Plain({O}, Tag::x) : memory::desc();
  p->strides = {g.stride_h, g.stride_w};
  p->dilates = {g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps: 0 is a dense window
  // Caffe pads both sides alike; with the right padding equal to the left, oneDNN's output size (rounded down)
  // is Caffe's.
  p->pad_l = {g.pad_h, g.pad_w};
  p->pad_r = {g.pad_h, g.pad_w};
  const bool any = LetOneDnnChooseLayouts();
  try {
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any ? Any(p->x.dims()) : p->x,
        any ? Any(p->w.dims()) : p->w, p->b, any ? Any(p->y.dims()) : p->y, p->strides, p->dilates, p->pad_l,
        p->pad_r);
    p->fwd_pd = dnnl::convolution_forward::primitive_desc(d, onednn::cpu_engine());
    p->fwd = dnnl::convolution_forward(p->fwd_pd);
    p->fwd_x.Init(p->x, p->fwd_pd.src_desc(), true);
    p->fwd_w.Init(p->w, p->fwd_pd.weights_desc(), true);
    p->fwd_y.Init(p->y, p->fwd_pd.dst_desc(), false);
    if (p->bias) p->fwd_b = memory(p->b, onednn::cpu_engine(), DNNL_MEMORY_NONE);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Convolution (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

void Convolution::Primitives::MakeBackward() {
  const bool any = LetOneDnnChooseLayouts();
  const memory::desc x_any = any ? Any(x.dims()) : x, w_any = any ? Any(w.dims()) : w,
                     y_any = any ? Any(y.dims()) : y;
  try {
    const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, x_any, w_any, y_any,
                                                   strides, dilates, pad_l, pad_r);
    const dnnl::convolution_backward_data::primitive_desc data_pd(dd, onednn::cpu_engine(), fwd_pd);
    bwd_data = dnnl::convolution_backward_data(data_pd);
    bwd_data_dy.Init(y, data_pd.diff_dst_desc(), true);
    bwd_data_w.Init(w, data_pd.weights_desc(), true);
    bwd_data_dx.Init(x, data_pd.diff_src_desc(), false);

    const dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, x_any, w_any, b, y_any,
                                                      strides, dilates, pad_l, pad_r);
    const dnnl::convolution_backward_weights::primitive_desc weights_pd(wd, onednn::cpu_engine(), fwd_pd);
    bwd_weights = dnnl::convolution_backward_weights(weights_pd);
    bwd_weights_x.Init(x, weights_pd.src_desc(), true);
    bwd_weights_dy.Init(y, weights_pd.diff_dst_desc(), true);
    bwd_weights_dw.Init(w, weights_pd.diff_weights_desc(), false);
    if (bias) bwd_weights_db = memory(b, onednn::cpu_engine(), DNNL_MEMORY_NONE);
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
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.fwd_x.In(x)},
                                       {DNNL_ARG_WEIGHTS, p.fwd_w.In(w)},
                                       {DNNL_ARG_DST, p.fwd_y.Target(y)}};
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
  if (dw || db) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.bwd_weights_x.In(x)},
                                         {DNNL_ARG_DIFF_DST, p.bwd_weights_dy.In(dy)},
                                         {DNNL_ARG_DIFF_WEIGHTS, p.bwd_weights_dw.Target(p.dw.data())}};
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
    p.bwd_data.execute(s, {{DNNL_ARG_DIFF_DST, p.bwd_data_dy.In(dy)},
                           {DNNL_ARG_WEIGHTS, p.bwd_data_w.In(w)},
                           {DNNL_ARG_DIFF_SRC, p.bwd_data_dx.Target(dx)}});
    p.bwd_data_dx.Out();
    s.wait();
  }
}

const char* Convolution::forward_kernel() const { return p_ ? p_->fwd_pd.impl_info_str() : "none"; }

}  // namespace onednn_conv
}  // namespace strata
