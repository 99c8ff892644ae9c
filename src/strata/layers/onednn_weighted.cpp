#include "onednn_weighted.hpp"

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
}

void WeightedPrimitives::Forward(const float* x_data, const float* w_data, const float* b_data, float* y_data,
                                 Blocked blocked) {
  dnnl::stream& s = cpu_stream();
  CallBuffer buffer(fwd_x_.bytes(blocked.x) + fwd_w_.bytes() + fwd_y_.bytes(blocked.y));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, fwd_x_.In(x_data, buffer, blocked.x)},
                                       {DNNL_ARG_WEIGHTS, fwd_w_.In(w_data, buffer)},
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
  dnnl::stream& s = cpu_stream();
  CallBuffer buffer(bwd_weights_x_.bytes(blocked.x) + bwd_weights_dy_.bytes(blocked.y) + bwd_weights_dw_.bytes() +
                    dw_bytes_ + db_bytes_ + (same_dy_layout_ ? 0 : bwd_data_dy_.bytes(blocked.y)) +
                    bwd_data_w_.bytes() + bwd_data_dx_.bytes(blocked.x));
  const memory* dy_weights = nullptr;  // dy as the weight gradient read it
  if (dw || db) {
    float* dw_call = static_cast<float*>(buffer.Take(dw_bytes_));
    float* db_call = db_bytes_ > 0 ? static_cast<float*>(buffer.Take(db_bytes_)) : nullptr;
    dy_weights = &bwd_weights_dy_.In(dy, buffer, blocked.y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bwd_weights_x_.In(x_data, buffer, blocked.x)},
                                         {DNNL_ARG_DIFF_DST, *dy_weights},
                                         {DNNL_ARG_DIFF_WEIGHTS, bwd_weights_dw_.Target(dw_call, buffer)}};
    if (bwd_weights_db_) {
      bwd_weights_db_.set_data_handle(db_call);
      args.emplace(DNNL_ARG_DIFF_BIAS, bwd_weights_db_);
    }
    bwd_weights_.execute(s, args);
    bwd_weights_dw_.Out();
    s.wait();
    // oneDNN overwrites its outputs; Strata's parameter gradients accumulate (iter_size, several bottoms).
    if (dw) cpu_axpy<float>(static_cast<int>(dw_count_), 1.f, dw_call, dw);
    if (db) cpu_axpy<float>(static_cast<int>(db_count_), 1.f, db_call, db);
  }
  if (dx) {
    const memory& dy_data = dy_weights && same_dy_layout_ ? *dy_weights : bwd_data_dy_.In(dy, buffer, blocked.y);
    bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, dy_data},
                          {DNNL_ARG_WEIGHTS, bwd_data_w_.In(w_data, buffer)},
                          {DNNL_ARG_DIFF_SRC, bwd_data_dx_.Target(dx, buffer, blocked.x)}});
    bwd_data_dx_.Out();
    s.wait();
  }
}

}  // namespace onednn
}  // namespace strata
