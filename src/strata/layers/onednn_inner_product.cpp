#include "onednn_inner_product.hpp"

#include <type_traits>
#include <utility>

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
  return rows == o.rows && inputs == o.inputs && outputs == o.outputs && transpose == o.transpose &&
         bias == o.bias && bf16 == o.bf16;
}

struct InnerProduct::Primitives : onednn::WeightedPrimitives {
  dnnl::inner_product_forward::primitive_desc fwd_pd;

  Tag w_tag = Tag::oi;  // the weights' layout: oi, or io when transposed

  // An operand in the layer's layout `tag` (or oneDNN's choice) and in `type`: `multiply` for what the
  // multiplications read, float for outputs and gradients.
  static memory::desc Operand(const memory::desc& plain, Tag tag, bool as_plain, memory::data_type type) {
    return as_plain ? memory::desc(plain.dims(), type, tag) : AnyDesc(plain.dims(), type);
  }
  memory::data_type Type(bool multiplied) const { return multiplied ? multiply : memory::data_type::f32; }
  memory::desc X(bool plain, bool multiplied = true) const { return Operand(x, Tag::nc, plain, Type(multiplied)); }
  memory::desc W(bool plain, bool multiplied = true) const { return Operand(w, w_tag, plain, Type(multiplied)); }
  memory::desc Y(bool plain, bool multiplied = true) const { return Operand(y, Tag::nc, plain, Type(multiplied)); }

  void MakeForward();
  std::pair<dnnl::inner_product_backward_data::primitive_desc, dnnl::inner_product_backward_weights::primitive_desc>
  BackwardDescs();
};

void InnerProduct::Primitives::MakeForward() {
  fwd_pd = PlainOrChosen<dnnl::inner_product_forward::primitive_desc>(
      [&](bool plain) {
        return dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, X(plain), W(plain), b,
                                                 Y(plain, false));
      },
      nullptr);
}

std::pair<dnnl::inner_product_backward_data::primitive_desc, dnnl::inner_product_backward_weights::primitive_desc>
InnerProduct::Primitives::BackwardDescs() {
  return {PlainOrChosen<dnnl::inner_product_backward_data::primitive_desc>(
              [&](bool plain) {
                return dnnl::inner_product_backward_data::desc(X(plain, false), W(plain), Y(plain));
              },
              &fwd_pd),
          PlainOrChosen<dnnl::inner_product_backward_weights::primitive_desc>(
              [&](bool plain) {
                return dnnl::inner_product_backward_weights::desc(X(plain), W(plain, false), b, Y(plain));
              },
              &fwd_pd)};
}

void InnerProduct::Configure(const Shape& s) {
  if (p_ && s == shape_) return;
  p_.reset();
  shape_ = s;
  auto p = std::make_unique<Primitives>();
  const memory::dim M = s.rows, K = s.inputs, N = s.outputs;
  p->x = PlainDesc({M, K}, Tag::nc);
  p->y = PlainDesc({M, N}, Tag::nc);
  // oneDNN's weights are O x I; Strata's transposed ones (K x N, row-major) are the same matrix column-major.
  p->w_tag = s.transpose ? Tag::io : Tag::oi;
  p->w = PlainDesc({N, K}, p->w_tag);
  p->b = s.bias ? PlainDesc({N}, Tag::x) : memory::desc();
  try {
    if (s.bf16) {
      try {
        p->multiply = memory::data_type::bf16;
        p->MakeForward();
        // bfloat16 only where all three passes have kernels of their own for it, as for convolutions.
        const auto backward = p->BackwardDescs();
        if (onednn::IsReference(p->fwd_pd) || onednn::IsReference(backward.first) ||
            onednn::IsReference(backward.second)) {
          p->multiply = memory::data_type::f32;
        }
      } catch (const dnnl::error& e) {
        if (e.status != dnnl_unimplemented) throw;
        p->multiply = memory::data_type::f32;  // no bfloat16 inner product on this CPU: float
      }
    }
    if (p->multiply == memory::data_type::f32) p->MakeForward();
    p->InitForward(p->fwd_pd);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "InnerProduct (engine ONEDNN): creating the forward primitive");
  }
  p_ = std::move(p);
}

void InnerProduct::MakeBackward() {
  Primitives& p = static_cast<Primitives&>(*p_);
  try {
    const auto pds = p.BackwardDescs();
    p.InitBackward(pds.first, pds.second);
  } catch (const dnnl::error& e) {
    onednn::Fail(e, "InnerProduct (engine ONEDNN): creating the backward primitives");
  }
}

}  // namespace onednn_ip
}  // namespace strata
