#include "onednn_inner_product.hpp"

#include <type_traits>

#include "onednn_weighted.hpp"
#include "strata/common.hpp"

namespace strata {
namespace onednn_ip {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

using onednn::AnyDesc;
using onednn::PlainDesc;

// A primitive descriptor on the layer's own (plain) layouts, where oneDNN has a kernel for them: its GEMM-based
// inner product reads row-major matrices either way round, so nothing is reordered. Where it has none, the
// layouts are oneDNN's choice and the operands are reordered within each call.
template <typename PrimitiveDesc, typename MakeDesc>
PrimitiveDesc PlainOrChosen(const MakeDesc& make, const dnnl::inner_product_forward::primitive_desc* hint) {
  for (bool plain : {true, false}) {
    try {
      const auto d = make(plain);
      if constexpr (std::is_same<PrimitiveDesc, dnnl::inner_product_forward::primitive_desc>::value) {
        return PrimitiveDesc(d, onednn::cpu_engine());
      } else {
        return PrimitiveDesc(d, onednn::cpu_engine(), *hint);
      }
    } catch (const dnnl::error& e) {
      if (!plain || e.status != dnnl_unimplemented) throw;
    }
  }
  return PrimitiveDesc();  // not reached
}

}  // namespace

bool Shape::operator==(const Shape& o) const {
  return rows == o.rows && inputs == o.inputs && outputs == o.outputs && transpose == o.transpose && bias == o.bias;
}

struct InnerProduct::Primitives : onednn::WeightedPrimitives {
  dnnl::inner_product_forward::primitive_desc fwd_pd;

  memory::desc X(bool plain) const { return plain ? x : AnyDesc(x.dims()); }
  memory::desc W(bool plain) const { return plain ? w : AnyDesc(w.dims()); }
  memory::desc Y(bool plain) const { return plain ? y : AnyDesc(y.dims()); }
};

void InnerProduct::Configure(const Shape& s) {
  if (p_ && s == shape_) return;
  p_.reset();
  shape_ = s;
  auto p = std::make_unique<Primitives>();
  const memory::dim M = s.rows, K = s.inputs, N = s.outputs;
  p->x = PlainDesc({M, K}, Tag::nc);
  p->y = PlainDesc({M, N}, Tag::nc);
  // oneDNN's weights are O x I; Strata's transposed ones (K x N, row-major) are the same matrix column-major.
  p->w = PlainDesc({N, K}, s.transpose ? Tag::io : Tag::oi);
  p->b = s.bias ? PlainDesc({N}, Tag::x) : memory::desc();
  try {
    Primitives& q = *p;
    p->fwd_pd = PlainOrChosen<dnnl::inner_product_forward::primitive_desc>(
        [&](bool plain) {
          return dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, q.X(plain), q.W(plain), q.b,
                                                   q.Y(plain));
        },
        nullptr);
    p->InitForward(p->fwd_pd);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "InnerProduct (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

void InnerProduct::MakeBackward() {
  Primitives& p = static_cast<Primitives&>(*p_);
  try {
    p.InitBackward(PlainOrChosen<dnnl::inner_product_backward_data::primitive_desc>(
                     [&](bool plain) {
                       return dnnl::inner_product_backward_data::desc(p.X(plain), p.W(plain), p.Y(plain));
                     },
                     &p.fwd_pd),
                 PlainOrChosen<dnnl::inner_product_backward_weights::primitive_desc>(
                     [&](bool plain) {
                       return dnnl::inner_product_backward_weights::desc(p.X(plain), p.W(plain), p.b, p.Y(plain));
                     },
                     &p.fwd_pd));
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "InnerProduct (engine ONEDNN): creating the backward primitives");
  }
}

}  // namespace onednn_ip
}  // namespace strata
