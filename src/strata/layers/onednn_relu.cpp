#include "onednn_relu.hpp"

#include "strata/common.hpp"
#include "strata/onednn_context.hpp"

namespace strata {
namespace onednn_relu {

using dnnl::memory;

struct ReLU::Primitives {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
  memory x, y, sign, dy, dx;  // the caller's memory, its pointers set on every call
};

ReLU::ReLU() = default;
ReLU::~ReLU() = default;

void ReLU::Configure(long count, float slope) {
  if (p_ && count == count_ && slope == slope_) return;
  p_.reset();
  count_ = count;
  slope_ = slope;
  auto p = std::make_unique<Primitives>();
  const memory::desc d = onednn::PlainDesc({count}, memory::format_tag::a);
  // For slope >= 0 the sign of y is the sign of x: backward reads y, which running in place leaves intact.
  const dnnl::algorithm algorithm =
      slope >= 0 ? dnnl::algorithm::eltwise_relu_use_dst_for_bwd : dnnl::algorithm::eltwise_relu;
  try {
    const dnnl::eltwise_forward::primitive_desc fwd_pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm, d, slope), onednn::cpu_engine());
    p->fwd = dnnl::eltwise_forward(fwd_pd);
    p->bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
        dnnl::eltwise_backward::desc(algorithm, d, d, slope), onednn::cpu_engine(), fwd_pd));
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "ReLU (engine ONEDNN): creating the primitives");
  }
  for (memory* m : {&p->x, &p->y, &p->sign, &p->dy, &p->dx}) *m = memory(d, onednn::cpu_engine(), DNNL_MEMORY_NONE);
  p_ = std::move(p);
}

void ReLU::Forward(const float* x, float* y) {
  CHECK(p_) << "Configure before Forward";
  Primitives& p = *p_;
  p.x.set_data_handle(const_cast<float*>(x));  // oneDNN only reads an input
  p.y.set_data_handle(y);
  p.fwd.execute(onednn::cpu_stream(), {{DNNL_ARG_SRC, p.x}, {DNNL_ARG_DST, p.y}});
  onednn::cpu_stream().wait();
}

void ReLU::Backward(const float* sign_source, const float* dy, float* dx) {
  CHECK(p_) << "Configure before Backward";
  Primitives& p = *p_;
  p.sign.set_data_handle(const_cast<float*>(sign_source));
  p.dy.set_data_handle(const_cast<float*>(dy));
  p.dx.set_data_handle(dx);
  p.bwd.execute(onednn::cpu_stream(), {{slope_ >= 0 ? DNNL_ARG_DST : DNNL_ARG_SRC, p.sign},
                                       {DNNL_ARG_DIFF_DST, p.dy},
                                       {DNNL_ARG_DIFF_SRC, p.dx}});
  onednn::cpu_stream().wait();
}

}  // namespace onednn_relu
}  // namespace strata
