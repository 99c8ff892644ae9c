#include "onednn_pooling.hpp"

#include <algorithm>

#include "strata/common.hpp"
#include "strata/memory_format.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn_pool {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Right/bottom padding that gives oneDNN Caffe's output size: the last window ends there (never negative: a
// floor-rounded output whose windows stop short of the image needs none).
memory::dim PadAfter(int size, int pooled, int kernel, int stride, int pad) {
  return std::max(0, (pooled - 1) * stride + kernel - size - pad);
}

}  // namespace

bool Shape::operator==(const Shape& o) const {
  return num == o.num && channels == o.channels && height == o.height && width == o.width &&
         pooled_h == o.pooled_h && pooled_w == o.pooled_w && kernel_h == o.kernel_h && kernel_w == o.kernel_w &&
         stride_h == o.stride_h && stride_w == o.stride_w && pad_h == o.pad_h && pad_w == o.pad_w && max == o.max;
}

const char* Mismatch(const Shape& s) {
  // A last window that starts past the image holds nothing: Caffe outputs -FLT_MAX (MAX) or 0 (AVE) there.
  if ((s.pooled_h - 1) * s.stride_h - s.pad_h >= s.height || (s.pooled_w - 1) * s.stride_w - s.pad_w >= s.width) {
    return "its last window lies wholly in the padding";
  }
  if (s.max || (s.pad_h == 0 && s.pad_w == 0)) return nullptr;
  const bool inside = (s.pooled_h - 1) * s.stride_h + s.kernel_h <= s.height + 2 * s.pad_h &&
                      (s.pooled_w - 1) * s.stride_w + s.kernel_w <= s.width + 2 * s.pad_w;
  return inside ? nullptr : "AVE's last window reaches past the padding, where Caffe's divisor is neither of oneDNN's";
}

struct Pooling::Primitives {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  bool have_backward = false;
  onednn::Operand x, y, dy, dx;
  memory workspace;  // MAX: where each output's maximum came from (oneDNN's format, in the caller's memory)
  memory::desc x_desc, y_desc;  // the layouts the primitives compute in
  memory::desc x_plain, y_plain;
  memory::dims strides, kernel, pad_l, pad_r;
  dnnl::algorithm algorithm;

  void MakeBackward();
};

Pooling::Pooling() = default;
Pooling::~Pooling() = default;

std::unique_ptr<Pooling::Primitives> Pooling::Make(bool blocked) const {
  const Shape& s = shape_;
  auto p = std::make_unique<Primitives>();
  const memory::dims x_dims{s.num, s.channels, s.height, s.width}, y_dims{s.num, s.channels, s.pooled_h, s.pooled_w};
  p->x_plain = onednn::PlainDesc(x_dims, Tag::nchw);
  p->y_plain = onednn::PlainDesc(y_dims, Tag::nchw);
  p->x_desc = blocked ? onednn::PlainDesc(x_dims, Tag::aBcd16b) : p->x_plain;
  p->y_desc = blocked ? onednn::PlainDesc(y_dims, Tag::aBcd16b) : p->y_plain;
  p->strides = {s.stride_h, s.stride_w};
  p->kernel = {s.kernel_h, s.kernel_w};
  p->pad_l = {s.pad_h, s.pad_w};
  p->pad_r = {PadAfter(s.height, s.pooled_h, s.kernel_h, s.stride_h, s.pad_h),
              PadAfter(s.width, s.pooled_w, s.kernel_w, s.stride_w, s.pad_w)};
  p->algorithm = s.max ? dnnl::algorithm::pooling_max
                 : (s.pad_h == 0 && s.pad_w == 0) ? dnnl::algorithm::pooling_avg_exclude_padding
                                                  : dnnl::algorithm::pooling_avg_include_padding;
  try {
    const dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, p->algorithm, p->x_desc, p->y_desc,
                                        p->strides, p->kernel, p->pad_l, p->pad_r);
    p->fwd_pd = dnnl::pooling_forward::primitive_desc(d, onednn::cpu_engine());
    p->fwd = dnnl::pooling_forward(p->fwd_pd);
    p->x.Init(p->x_plain, p->fwd_pd.src_desc(), true);
    p->y.Init(p->y_plain, p->fwd_pd.dst_desc(), false);
    if (s.max) p->workspace = memory(p->fwd_pd.workspace_desc(), onednn::cpu_engine(), DNNL_MEMORY_NONE);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Pooling (engine ONEDNN): creating the forward primitive");
  }
  return p;
}

void Pooling::Primitives::MakeBackward() {
  try {
    const dnnl::pooling_backward::desc d(algorithm, x_desc, y_desc, strides, kernel, pad_l, pad_r);
    const dnnl::pooling_backward::primitive_desc pd(d, onednn::cpu_engine(), fwd_pd);
    bwd = dnnl::pooling_backward(pd);
    dy.Init(y_plain, pd.diff_dst_desc(), true);
    dx.Init(x_plain, pd.diff_src_desc(), false);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Pooling (engine ONEDNN): creating the backward primitive");
  }
  have_backward = true;
}

void Pooling::Configure(const Shape& s) {
  if (plain_ && s == shape_) return;
  plain_.reset();
  blocked_.reset();
  last_ = nullptr;
  shape_ = s;
  plain_ = Make(false);
  if (s.channels % kChannelBlock16 == 0 && blocked_layouts_enabled()) blocked_ = Make(true);
}

size_t Pooling::workspace_bytes() const {
  CHECK(plain_) << "Configure first";
  if (!shape_.max) return 0;
  size_t bytes = plain_->fwd_pd.workspace_desc().get_size();
  if (blocked_) bytes = std::max(bytes, blocked_->fwd_pd.workspace_desc().get_size());
  return bytes;
}

void Pooling::Forward(const float* x, float* y, void* workspace, bool x_blocked, bool y_blocked) {
  CHECK(plain_) << "Configure before Forward";
  CHECK(!x_blocked || blocked_) << "a blocked input to a pooling of " << shape_.channels << " channels";
  Primitives& p = x_blocked ? *blocked_ : *plain_;
  last_ = &p;
  onednn::CallBuffer buffer(p.x.bytes(x_blocked) + p.y.bytes(y_blocked));
  onednn::Execute(p.fwd, {{DNNL_ARG_SRC, p.x.In(x, buffer, x_blocked)}, {DNNL_ARG_DST, p.y.Target(y, buffer, y_blocked)}},
                  &p.y, shape_.max ? &p.workspace : nullptr, workspace);
}

void Pooling::Backward(const float* dy, float* dx, void* workspace, bool dy_blocked, bool dx_blocked) {
  CHECK(last_) << "Forward before Backward";
  Primitives& p = *last_;
  if (!p.have_backward) p.MakeBackward();
  onednn::CallBuffer buffer(p.dy.bytes(dy_blocked) + p.dx.bytes(dx_blocked));
  onednn::Execute(p.bwd,
                  {{DNNL_ARG_DIFF_DST, p.dy.In(dy, buffer, dy_blocked)},
                   {DNNL_ARG_DIFF_SRC, p.dx.Target(dx, buffer, dx_blocked)}},
                  &p.dx, shape_.max ? &p.workspace : nullptr, workspace);
}

}  // namespace onednn_pool
}  // namespace strata
