#include "onednn_softmax.hpp"

#include "strata/common.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn_softmax {

using dnnl::memory;

struct Softmax::Primitives {
  dnnl::softmax_forward fwd;
  dnnl::softmax_backward bwd;
  memory::desc d;
};

Softmax::Softmax() = default;
Softmax::~Softmax() = default;

void Softmax::Configure(int outer, int channels, int inner) {
  if (p_ && outer == outer_ && channels == channels_ && inner == inner_) return;
  p_.reset();
  outer_ = outer;
  channels_ = channels;
  inner_ = inner;
  auto p = std::make_unique<Primitives>();
  p->d = onednn::PlainDesc({outer, channels, inner}, memory::format_tag::abc);
  try {
    const dnnl::softmax_forward::primitive_desc fwd_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, p->d, 1), onednn::cpu_engine());
    p->fwd = dnnl::softmax_forward(fwd_pd);
    p->bwd = dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(dnnl::softmax_backward::desc(p->d, p->d, 1),
                                                                           onednn::cpu_engine(), fwd_pd));
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "Softmax (engine ONEDNN): creating the primitives");
  }
  p_ = std::move(p);
}

void Softmax::Forward(const float* x, float* y) {
  CHECK(p_) << "Configure before Forward";
  const dnnl::engine& engine = onednn::cpu_engine();
  p_->fwd.execute(onednn::cpu_stream(), {{DNNL_ARG_SRC, memory(p_->d, engine, const_cast<float*>(x))},
                                         {DNNL_ARG_DST, memory(p_->d, engine, y)}});
  onednn::cpu_stream().wait();
}

void Softmax::Backward(const float* y, const float* dy, float* dx) {
  CHECK(p_) << "Configure before Backward";
  const dnnl::engine& engine = onednn::cpu_engine();
  p_->bwd.execute(onednn::cpu_stream(), {{DNNL_ARG_DST, memory(p_->d, engine, const_cast<float*>(y))},
                                         {DNNL_ARG_DIFF_DST, memory(p_->d, engine, const_cast<float*>(dy))},
                                         {DNNL_ARG_DIFF_SRC, memory(p_->d, engine, dx)}});
  onednn::cpu_stream().wait();
}

}  // namespace onednn_softmax
}  // namespace strata
