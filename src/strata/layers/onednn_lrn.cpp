#include "onednn_lrn.hpp"

#include <cstring>

#include "strata/common.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn_lrn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

bool Reference(const dnnl::primitive_desc& pd) { return std::strstr(pd.impl_info_str(), "ref") != nullptr; }

}  // namespace

bool Shape::operator==(const Shape& o) const {
  return num == o.num && channels == o.channels && height == o.height && width == o.width &&
         local_size == o.local_size && alpha == o.alpha && beta == o.beta && k == o.k && across == o.across;
}

struct LRN::Primitives {
  dnnl::lrn_forward::primitive_desc fwd_pd;
  dnnl::lrn_forward fwd;
  dnnl::lrn_backward::primitive_desc bwd_pd;
  dnnl::lrn_backward bwd;
  onednn::Operand fwd_x, y, bwd_x, dy, dx;
  memory workspace;  // oneDNN's record of the forward (its format, in the caller's memory)
};

LRN::LRN() = default;
LRN::~LRN() = default;

void LRN::Configure(const Shape& s) {
  if (p_ && s == shape_) return;
  p_.reset();
  shape_ = s;
  auto p = std::make_unique<Primitives>();
  const memory::dims dims{s.num, s.channels, s.height, s.width};
  const memory::desc plain = onednn::PlainDesc(dims, Tag::nchw);
  const dnnl::algorithm algorithm =
      s.across ? dnnl::algorithm::lrn_across_channels : dnnl::algorithm::lrn_within_channel;
  // Caffe's WITHIN_CHANNEL has no k: its scale starts from 1.
  const float k = s.across ? s.k : 1.f;
  // LRN takes no "any" layout. oneDNN 2.6's kernels for plain NCHW are a JIT forward (ACROSS_CHANNELS only) and a
  // reference backward some 50 times slower than its JIT one on the channel-blocked layouts, so the first layout
  // with JIT kernels both ways is taken, the data reordered into it and back (docs/onednn.md).
  try {
    for (Tag tag : {Tag::nChw16c, Tag::nChw8c, Tag::nchw}) {
      const memory::desc d = onednn::PlainDesc(dims, tag);
      p->fwd_pd = dnnl::lrn_forward::primitive_desc(
          dnnl::lrn_forward::desc(dnnl::prop_kind::forward_training, algorithm, d, s.local_size, s.alpha, s.beta, k),
          onednn::cpu_engine());
      p->bwd_pd = dnnl::lrn_backward::primitive_desc(
          dnnl::lrn_backward::desc(algorithm, d, d, s.local_size, s.alpha, s.beta, k), onednn::cpu_engine(),
          p->fwd_pd);
      if (!Reference(p->fwd_pd) && !Reference(p->bwd_pd)) break;
    }
    p->fwd = dnnl::lrn_forward(p->fwd_pd);
    p->fwd_x.Init(plain, p->fwd_pd.src_desc(), true);
    p->y.Init(plain, p->fwd_pd.dst_desc(), false);
    p->workspace = memory(p->fwd_pd.workspace_desc(), onednn::cpu_engine(), DNNL_MEMORY_NONE);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "LRN (engine ONEDNN): creating the primitives");
  }
  p_ = std::move(p);
}

size_t LRN::workspace_bytes() const {
  CHECK(p_) << "Configure first";
  return p_->fwd_pd.workspace_desc().get_size();
}

void LRN::Forward(const float* x, float* y, void* workspace) {
  CHECK(p_) << "Configure before Forward";
  Primitives& p = *p_;
  onednn::CallBuffer buffer(p.fwd_x.bytes() + p.y.bytes());
  onednn::Execute(p.fwd, {{DNNL_ARG_SRC, p.fwd_x.In(x, buffer)}, {DNNL_ARG_DST, p.y.Target(y, buffer)}}, &p.y,
                  &p.workspace, workspace);
}

void LRN::Backward(const float* x, const float* dy, float* dx, void* workspace) {
  CHECK(p_) << "Configure before Backward";
  Primitives& p = *p_;
  if (!p.bwd) {
    try {
      p.bwd = dnnl::lrn_backward(p.bwd_pd);
      const memory::desc plain = onednn::PlainDesc(p.fwd_pd.src_desc().dims(), Tag::nchw);
      p.bwd_x.Init(plain, p.bwd_pd.src_desc(), true);
      p.dy.Init(plain, p.bwd_pd.diff_dst_desc(), true);
      p.dx.Init(plain, p.bwd_pd.diff_src_desc(), false);
    } catch (const dnnl::error& e) {
      onednn::Fail(e, "LRN (engine ONEDNN): creating the backward primitive");
    }
  }
  onednn::CallBuffer buffer(p.bwd_x.bytes() + p.dy.bytes() + p.dx.bytes());
  onednn::Execute(p.bwd,
                  {{DNNL_ARG_SRC, p.bwd_x.In(x, buffer)},
                   {DNNL_ARG_DIFF_DST, p.dy.In(dy, buffer)},
                   {DNNL_ARG_DIFF_SRC, p.dx.Target(dx, buffer)}},
                  &p.dx, &p.workspace, workspace);
}

}  // namespace onednn_lrn
}  // namespace strata
