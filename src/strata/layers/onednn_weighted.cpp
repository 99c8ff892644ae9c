#include "onednn_weighted.hpp"

#include <sstream>
#include <unordered_map>

#include "strata/common.hpp"
#include "strata/math_functions.hpp"

namespace strata {
namespace onednn {

using dnnl::memory;

WeightedEngine::WeightedEngine() = default;
WeightedEngine::~WeightedEngine() = default;

void WeightedEngine::Forward(const float* x, const float* w, const float* b, float* y, Blocked blocked) {
  CHECK(p_) << "Configure before Forward";
  p_->Forward(x, w, b, y, blocked);
}

void WeightedEngine::Backward(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                              Blocked blocked) {
  CHECK(p_) << "Configure before Backward";
  if (!p_->have_backward()) MakeBackward();
  p_->Backward(dy, x, w, dx, dw, db, blocked);
}

bool WeightedEngine::writes_blocked_output() const { return p_ && p_->writes_blocked_output(); }

bool WeightedEngine::bf16() const { return p_ && p_->multiply == memory::data_type::bf16; }

CustomFormatPtr WeightedEngine::weights_layout() const {
  return p_ && param_layouts_enabled() ? p_->weights_layout() : nullptr;
}

void WeightedEngine::PrepareBackward() {
  CHECK(p_) << "Configure before PrepareBackward";
  if (!p_->have_backward()) MakeBackward();
}

namespace {

// A parameter in one of oneDNN's weight formats (f32, no padding): a reorder each way, made per conversion (a
// parameter converts once, and again only after a plain reader such as a snapshot).
class WeightsFormat : public CustomFormat {
 public:
  WeightsFormat(const memory::desc& plain, const memory::desc& laid) : plain_(plain), laid_(laid) {}
  size_t bytes() const override { return laid_.get_size(); }
  void ToLayout(const void* plain, void* laid_out) const override { Run(plain_, plain, laid_, laid_out); }
  void FromLayout(const void* laid_out, void* plain) const override { Run(laid_, laid_out, plain_, plain); }
  bool Same(const CustomFormat& other) const override {
    const auto* o = dynamic_cast<const WeightsFormat*>(&other);
    return o && o->plain_ == plain_ && o->laid_ == laid_;
  }
  std::string name() const override {
    // The blocking of the C descriptor: outer strides and the inner blocks, per dimension.
    const dnnl_memory_desc_t& d = laid_.data;
    std::ostringstream s;
    s << "onednn";
    for (int i = 0; i < d.ndims; ++i) s << (i ? "x" : ":") << d.dims[i];
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    s << " strides";
    for (int i = 0; i < d.ndims; ++i) s << " " << b.strides[i];
    s << " blocks";
    for (int i = 0; i < b.inner_nblks; ++i) s << " " << b.inner_idxs[i] << ":" << b.inner_blks[i];
    return s.str();
  }

 private:
  static void Run(const memory::desc& from, const void* src, const memory::desc& to, void* dst) {
    memory a(from, cpu_engine(), const_cast<void*>(src)), b(to, cpu_engine(), dst);
    dnnl::reorder(a, b).execute(cpu_stream(), a, b);
    cpu_stream().wait();
  }
  memory::desc plain_, laid_;
};

}  // namespace

void WeightedPrimitives::InitForward(const dnnl::primitive_desc& pd) {
  fwd_ = dnnl::primitive(pd);
  fwd_x_.Init(x, pd.src_desc(0), true);
  fwd_w_.Init(w, pd.weights_desc(0), true);
  fwd_y_.Init(y, pd.dst_desc(0), false);
  if (!b.is_zero()) fwd_b_ = memory(b, cpu_engine(), DNNL_MEMORY_NONE);
}

void WeightedPrimitives::InitBackward(const dnnl::primitive_desc& data_pd, const dnnl::primitive_desc& weights_pd) {
  bwd_data_ = dnnl::primitive(data_pd);
  bwd_data_dy_.Init(y, data_pd.diff_dst_desc(0), true);
  bwd_data_w_.Init(w, data_pd.weights_desc(0), true);
  bwd_data_dx_.Init(x, data_pd.diff_src_desc(0), false);
  bwd_weights_ = dnnl::primitive(weights_pd);
  bwd_weights_x_.Init(x, weights_pd.src_desc(0), true);
  bwd_weights_dy_.Init(y, weights_pd.diff_dst_desc(0), true);
  same_dy_layout_ = weights_pd.diff_dst_desc(0) == data_pd.diff_dst_desc(0);
  bwd_weights_dw_.Init(w, weights_pd.diff_weights_desc(0), false);
  if (!b.is_zero()) bwd_weights_db_ = memory(b, cpu_engine(), DNNL_MEMORY_NONE);
  // The gradients of one call are added to the layer's at once: their buffers live in the call buffer too.
  dw_count_ = w.get_size() / sizeof(float);
  db_count_ = b.get_size() / sizeof(float);
  dw_bytes_ = CallBuffer::Aligned(w.get_size());
  db_bytes_ = CallBuffer::Aligned(b.get_size());
  have_backward_ = true;
  // The weights and their gradient are kept in the weight gradient's layout (float, like the weights) where it
  // is one of oneDNN's blocked formats without padding: the gradient is then written where it accumulates, and
  // the forward reads the weights in place (the same format, in float) or converts them once.
  const memory::desc dw_chosen = weights_pd.diff_weights_desc(0);
  w_layout_ = nullptr;
  if (dw_chosen != w && dw_chosen.get_size() == w.get_size() &&
      dw_chosen.data.format_kind == dnnl_blocked && dw_chosen.data.extra.flags == 0) {
    w_layout_ = std::make_shared<WeightsFormat>(w, dw_chosen);
    fwd_w_.SetAlternate(dw_chosen);
    bwd_data_w_.SetAlternate(dw_chosen);
    bwd_weights_dw_.SetAlternate(dw_chosen);
  }
}

void WeightedPrimitives::Forward(const float* x_data, const float* w_data, const float* b_data, float* y_data,
                                 Blocked blocked) {
  dnnl::stream& s = cpu_stream();
  CHECK(!blocked.w || w_layout_) << "weights in a layout the primitives have none of";
  CallBuffer buffer(fwd_x_.bytes(blocked.x) + fwd_w_.bytes(blocked.w) + fwd_y_.bytes(blocked.y));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, fwd_x_.In(x_data, buffer, blocked.x)},
                                       {DNNL_ARG_WEIGHTS, fwd_w_.In(w_data, buffer, blocked.w)},
                                       {DNNL_ARG_DST, fwd_y_.Target(y_data, buffer, blocked.y)}};
  if (fwd_b_) {
    fwd_b_.set_data_handle(const_cast<float*>(b_data));
    args.emplace(DNNL_ARG_BIAS, fwd_b_);
  }
  fwd_.execute(s, args);
  fwd_y_.Out();
  s.wait();
}

void WeightedPrimitives::Backward(const float* dy, const float* x_data, const float* w_data, float* dx, float* dw,
                                  float* db, Blocked blocked) {
  CHECK(have_backward_) << "InitBackward before Backward";
  CHECK(!blocked.w || w_layout_) << "weights in a layout the primitives have none of";
  dnnl::stream& s = cpu_stream();
  CallBuffer buffer(bwd_weights_x_.bytes(blocked.x) + bwd_weights_dy_.bytes(blocked.y) +
                    bwd_weights_dw_.bytes(blocked.w) + dw_bytes_ + db_bytes_ +
                    (same_dy_layout_ ? 0 : bwd_data_dy_.bytes(blocked.y)) + bwd_data_w_.bytes(blocked.w) +
                    bwd_data_dx_.bytes(blocked.x));
  const memory* dy_weights = nullptr;  // dy as the weight gradient read it
  if (dw || db) {
    float* dw_call = static_cast<float*>(buffer.Take(dw_bytes_));
    float* db_call = db_bytes_ > 0 ? static_cast<float*>(buffer.Take(db_bytes_)) : nullptr;
    dy_weights = &bwd_weights_dy_.In(dy, buffer, blocked.y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bwd_weights_x_.In(x_data, buffer, blocked.x)},
                                         {DNNL_ARG_DIFF_DST, *dy_weights},
                                         {DNNL_ARG_DIFF_WEIGHTS, bwd_weights_dw_.Target(dw_call, buffer, blocked.w)}};
    if (bwd_weights_db_) {
      bwd_weights_db_.set_data_handle(db_call);
      args.emplace(DNNL_ARG_DIFF_BIAS, bwd_weights_db_);
    }
    bwd_weights_.execute(s, args);
    bwd_weights_dw_.Out();
    s.wait();
    // oneDNN overwrites its outputs; Strata's parameter gradients accumulate (iter_size, several bottoms), in
    // whichever layout both are (the weights' CustomFormat with blocked.w).
    if (dw) cpu_axpy<float>(static_cast<int>(dw_count_), 1.f, dw_call, dw);
    if (db) cpu_axpy<float>(static_cast<int>(db_count_), 1.f, db_call, db);
  }
  if (dx) {
    const memory& dy_data = dy_weights && same_dy_layout_ ? *dy_weights : bwd_data_dy_.In(dy, buffer, blocked.y);
    bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, dy_data},
                          {DNNL_ARG_WEIGHTS, bwd_data_w_.In(w_data, buffer, blocked.w)},
                          {DNNL_ARG_DIFF_SRC, bwd_data_dx_.Target(dx, buffer, blocked.x)}});
    bwd_data_dx_.Out();
    s.wait();
  }
}

}  // namespace onednn
}  // namespace strata
