// The recurrent layers' passes, written once over a device's operations (Math: CpuMath or GpuMath,
// recurrent_math.hpp): RecurrentLayer's shared pieces, then RNN's, LSTM's and LSTMUnit's forward and backward.
// The .cpp files instantiate them with CpuMath, the .cu files with GpuMath (private to src/strata/layers).
#pragma once

#include <vector>

#include "recurrent_math.hpp"
#include "strata/layers/lstm_layer.hpp"
#include "strata/layers/recurrent_layer.hpp"
#include "strata/layers/rnn_layer.hpp"

namespace strata {

template <typename Dtype>
template <typename Math>
std::vector<const Dtype*> RecurrentLayer<Dtype>::BeginForward(const BlobVec& bottom) {
  std::vector<const Dtype*> initial(NumStates());
  if (expose_hidden()) {
    for (int s = 0; s < NumStates(); ++s) initial[s] = Math::data(*bottom[state_bottom(s)]);
    return initial;
  }
  // A step takes the state the last forward left; a replay starts again from where the last forward started.
  if (!replaying_) {
    for (int s = 0; s < NumStates(); ++s) {
      Math::copy(N_ * H_, Math::data(stateT_[s]), Math::mutable_data(state0_[s]));
    }
  }
  for (int s = 0; s < NumStates(); ++s) initial[s] = Math::data(state0_[s]);
  return initial;
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::EndForward(const std::vector<const Dtype*>& final_states, const BlobVec& top) {
  if (!expose_hidden() && replaying_) return;  // a replay leaves the carried state alone
  for (int s = 0; s < NumStates(); ++s) {
    Dtype* dst = expose_hidden() ? Math::mutable_data(*top[1 + s]) : Math::mutable_data(stateT_[s]);
    Math::copy(N_ * H_, final_states[s], dst);
  }
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::InputTransform(const BlobVec& bottom) {
  const int G = GateDim();
  const int rows = T_ * N_;
  Dtype* pre = Math::mutable_data(gates_);
  Math::gemm(CblasNoTrans, CblasTrans, rows, G, input_dim_, Dtype(1), Math::data(*bottom[0]),
             Math::data(*this->blobs_[0]), Dtype(0), pre);
  Math::add_to_rows(rows, G, Math::data(*this->blobs_[1]), pre);
  if (!static_input_) return;
  Dtype* from_static = Math::mutable_data(static_gates_);
  Math::gemm(CblasNoTrans, CblasTrans, N_, G, static_dim_, Dtype(1), Math::data(*bottom[static_index()]),
             Math::data(*this->blobs_[2]), Dtype(0), from_static);
  for (int t = 0; t < T_; ++t) Math::axpy(N_ * G, Dtype(1), from_static, pre + static_cast<long>(t) * N_ * G);
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::RecurrentForward(int t, const Dtype* cont, const Dtype* h_prev, Dtype* pre_t) {
  Dtype* conted = Math::mutable_data(conted_);
  Math::scale_rows(N_, H_, cont + static_cast<long>(t) * N_, h_prev, conted);
  Math::gemm(CblasNoTrans, CblasTrans, N_, GateDim(), H_, Dtype(1), conted, Math::data(*this->blobs_[w_h_index()]),
             Dtype(1), pre_t);
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::RecurrentBackward(int t, const Dtype* cont, const Dtype* h_prev, const Dtype* dpre_t,
                                              Dtype* dh_prev) {
  const int G = GateDim();
  const Dtype* cont_t = cont + static_cast<long>(t) * N_;
  if (this->param_propagate_down(w_h_index())) {
    Dtype* conted = Math::mutable_data(conted_);
    Math::scale_rows(N_, H_, cont_t, h_prev, conted);
    Math::gemm(CblasTrans, CblasNoTrans, G, H_, N_, Dtype(1), dpre_t, conted, Dtype(1),
               Math::mutable_diff(*this->blobs_[w_h_index()]));
  }
  if (dh_prev) {
    Math::gemm(CblasNoTrans, CblasNoTrans, N_, H_, G, Dtype(1), dpre_t, Math::data(*this->blobs_[w_h_index()]),
               Dtype(0), dh_prev);
    Math::scale_rows(N_, H_, cont_t, dh_prev, dh_prev);
  }
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::InputTransformBackward(const BlobVec& bottom, const std::vector<bool>& propagate_down) {
  const int G = GateDim();
  const int rows = T_ * N_;
  const Dtype* dpre = Math::diff(gates_);
  if (this->param_propagate_down(0)) {
    Math::gemm(CblasTrans, CblasNoTrans, G, input_dim_, rows, Dtype(1), dpre, Math::data(*bottom[0]), Dtype(1),
               Math::mutable_diff(*this->blobs_[0]));
  }
  if (this->param_propagate_down(1)) Math::add_column_sums(rows, G, dpre, Math::mutable_diff(*this->blobs_[1]));
  if (static_input_ && (this->param_propagate_down(2) || propagate_down[static_index()])) {
    // x_static feeds every step: its pre-activation gradient is the sum over the steps.
    Dtype* d_static = Math::mutable_diff(static_gates_);
    Math::set(N_ * G, Dtype(0), d_static);
    for (int t = 0; t < T_; ++t) Math::axpy(N_ * G, Dtype(1), dpre + static_cast<long>(t) * N_ * G, d_static);
    if (this->param_propagate_down(2)) {
      Math::gemm(CblasTrans, CblasNoTrans, G, static_dim_, N_, Dtype(1), d_static, Math::data(*bottom[static_index()]),
                 Dtype(1), Math::mutable_diff(*this->blobs_[2]));
    }
    if (propagate_down[static_index()]) {
      Math::gemm(CblasNoTrans, CblasNoTrans, N_, static_dim_, G, Dtype(1), d_static, Math::data(*this->blobs_[2]),
                 Dtype(0), Math::mutable_diff(*bottom[static_index()]));
    }
  }
  if (propagate_down[0]) {
    Math::gemm(CblasNoTrans, CblasNoTrans, rows, input_dim_, G, Dtype(1), dpre, Math::data(*this->blobs_[0]), Dtype(0),
               Math::mutable_diff(*bottom[0]));
  }
}

template <typename Dtype>
template <typename Math>
void RecurrentLayer<Dtype>::InitialStateBackward(int s, const Dtype* d_state, const std::vector<bool>& propagate_down,
                                                 const BlobVec& bottom) {
  if (!expose_hidden() || !propagate_down[state_bottom(s)]) return;
  Math::copy(N_ * H_, d_state, Math::mutable_diff(*bottom[state_bottom(s)]));
}

// ---- RNN ----

template <typename Dtype>
template <typename Math>
void RNNLayer<Dtype>::ForwardWith(const BlobVec& bottom, const BlobVec& top) {
  const int T = this->T_, N = this->N_, H = this->H_;
  const long step = static_cast<long>(N) * H;
  const std::vector<const Dtype*> initial = this->template BeginForward<Math>(bottom);
  this->template InputTransform<Math>(bottom);
  const Dtype* cont = Math::data(*bottom[1]);
  Dtype* pre = Math::mutable_data(this->gates_);
  Dtype* h = Math::mutable_data(hidden_);
  for (int t = 0; t < T; ++t) {
    // h_t = tanh(W_hh (cont_t h_{t-1}) + W_xh x_t + b_h (+ W_xh_static x_static))
    this->template RecurrentForward<Math>(t, cont, t == 0 ? initial[0] : h + (t - 1) * step, pre + t * step);
    Math::tanh(static_cast<int>(step), pre + t * step, h + t * step);
  }
  // o = tanh(W_ho h + b_o) for all steps at once.
  const int rows = T * N;
  Dtype* o = Math::mutable_data(*top[0]);
  const int w_ho = this->extra_index();
  Math::gemm(CblasNoTrans, CblasTrans, rows, H, H, Dtype(1), h, Math::data(*this->blobs_[w_ho]), Dtype(0), o);
  Math::add_to_rows(rows, H, Math::data(*this->blobs_[w_ho + 1]), o);
  Math::tanh(rows * H, o, o);
  this->template EndForward<Math>({h + (T - 1) * step}, top);
}

template <typename Dtype>
template <typename Math>
void RNNLayer<Dtype>::BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  this->CheckNoContGradient(propagate_down);
  const int T = this->T_, N = this->N_, H = this->H_;
  const long step = static_cast<long>(N) * H;
  const int rows = T * N;
  const int w_ho = this->extra_index();
  // The output layer: d(W_ho h + b_o) = do * (1 - o^2), held in gates_'s diff until the loop below overwrites
  // it step by step with the pre-activation gradients.
  Dtype* dpre = Math::mutable_diff(this->gates_);
  Math::tanh_backward(rows * H, Math::data(*top[0]), Math::diff(*top[0]), dpre);
  const Dtype* h = Math::data(hidden_);
  if (this->param_propagate_down(w_ho)) {
    Math::gemm(CblasTrans, CblasNoTrans, H, H, rows, Dtype(1), dpre, h, Dtype(1),
               Math::mutable_diff(*this->blobs_[w_ho]));
  }
  if (this->param_propagate_down(w_ho + 1)) {
    Math::add_column_sums(rows, H, dpre, Math::mutable_diff(*this->blobs_[w_ho + 1]));
  }
  Dtype* dh = Math::mutable_diff(hidden_);  // the gradient reaching each h_t
  Math::gemm(CblasNoTrans, CblasNoTrans, rows, H, H, Dtype(1), dpre, Math::data(*this->blobs_[w_ho]), Dtype(0), dh);
  // The gradient flowing from step t + 1 back to h_t: from the h_T top at the last step.
  Dtype* carry = Math::mutable_data(this->carry_[0]);
  if (this->expose_hidden()) {
    Math::copy(static_cast<int>(step), Math::diff(*top[1]), carry);
  } else {
    Math::set(static_cast<int>(step), Dtype(0), carry);
  }
  const Dtype* cont = Math::data(*bottom[1]);
  const Dtype* h0 = this->expose_hidden() ? Math::data(*bottom[this->state_bottom(0)]) : Math::data(this->state0_[0]);
  const bool want_h0 = this->InitialStateWanted(0, propagate_down);
  for (int t = T - 1; t >= 0; --t) {
    Math::axpy(static_cast<int>(step), Dtype(1), carry, dh + t * step);
    Math::tanh_backward(static_cast<int>(step), h + t * step, dh + t * step, dpre + t * step);
    this->template RecurrentBackward<Math>(t, cont, t == 0 ? h0 : h + (t - 1) * step, dpre + t * step,
                                           t > 0 || want_h0 ? carry : nullptr);
  }
  this->template InitialStateBackward<Math>(0, carry, propagate_down, bottom);
  this->template InputTransformBackward<Math>(bottom, propagate_down);
}

// ---- LSTM ----

template <typename Dtype>
template <typename Math>
void LSTMLayer<Dtype>::ForwardWith(const BlobVec& bottom, const BlobVec& top) {
  const int T = this->T_, N = this->N_, H = this->H_;
  const long step = static_cast<long>(N) * H;
  const long gate_step = 4 * step;
  const std::vector<const Dtype*> initial = this->template BeginForward<Math>(bottom);  // h_0, c_0
  this->template InputTransform<Math>(bottom);
  const Dtype* cont = Math::data(*bottom[1]);
  Dtype* pre = Math::mutable_data(this->gates_);
  Dtype* c = Math::mutable_data(cells_);
  Dtype* h = Math::mutable_data(*top[0]);
  for (int t = 0; t < T; ++t) {
    const Dtype* h_prev = t == 0 ? initial[0] : h + (t - 1) * step;
    const Dtype* c_prev = t == 0 ? initial[1] : c + (t - 1) * step;
    this->template RecurrentForward<Math>(t, cont, h_prev, pre + t * gate_step);
    Math::lstm_forward(N, H, pre + t * gate_step, c_prev, cont + t * N, c + t * step, h + t * step);
  }
  this->template EndForward<Math>({h + (T - 1) * step, c + (T - 1) * step}, top);
}

template <typename Dtype>
template <typename Math>
void LSTMLayer<Dtype>::BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  this->CheckNoContGradient(propagate_down);
  const int T = this->T_, N = this->N_, H = this->H_;
  const long step = static_cast<long>(N) * H;
  const long gate_step = 4 * step;
  // The gradients flowing from step t + 1 back to h_t and c_t: from the h_T and c_T tops at the last step.
  Dtype* dh_carry = Math::mutable_data(this->carry_[0]);
  Dtype* dc_carry = Math::mutable_data(this->carry_[1]);
  for (int s = 0; s < 2; ++s) {
    Dtype* carry = s == 0 ? dh_carry : dc_carry;
    if (this->expose_hidden()) {
      Math::copy(static_cast<int>(step), Math::diff(*top[1 + s]), carry);
    } else {
      Math::set(static_cast<int>(step), Dtype(0), carry);
    }
  }
  const Dtype* cont = Math::data(*bottom[1]);
  const Dtype* pre = Math::data(this->gates_);
  Dtype* dpre = Math::mutable_diff(this->gates_);
  const Dtype* c = Math::data(cells_);
  const Dtype* h = Math::data(*top[0]);
  const Dtype* dh_top = Math::diff(*top[0]);
  Dtype* dh = Math::mutable_data(dh_);
  const Dtype* h0 = this->expose_hidden() ? Math::data(*bottom[this->state_bottom(0)]) : Math::data(this->state0_[0]);
  const Dtype* c0 = this->expose_hidden() ? Math::data(*bottom[this->state_bottom(1)]) : Math::data(this->state0_[1]);
  const bool want_h0 = this->InitialStateWanted(0, propagate_down);
  for (int t = T - 1; t >= 0; --t) {
    Math::add(static_cast<int>(step), dh_top + t * step, dh_carry, dh);
    // The cell step's backward; dc_carry becomes the gradient reaching c_{t-1}.
    Math::lstm_backward(N, H, pre + t * gate_step, t == 0 ? c0 : c + (t - 1) * step, cont + t * N, c + t * step,
                        dc_carry, dh, dpre + t * gate_step, dc_carry);
    this->template RecurrentBackward<Math>(t, cont, t == 0 ? h0 : h + (t - 1) * step, dpre + t * gate_step,
                                           t > 0 || want_h0 ? dh_carry : nullptr);
  }
  this->template InitialStateBackward<Math>(0, dh_carry, propagate_down, bottom);
  this->template InitialStateBackward<Math>(1, dc_carry, propagate_down, bottom);
  this->template InputTransformBackward<Math>(bottom, propagate_down);
}

// ---- LSTMUnit ----

template <typename Dtype>
template <typename Math>
void LSTMUnitLayer<Dtype>::ForwardWith(const BlobVec& bottom, const BlobVec& top) {
  Math::lstm_forward(bottom[0]->shape(1), H_, Math::data(*bottom[1]), Math::data(*bottom[0]), Math::data(*bottom[2]),
                     Math::mutable_data(*top[0]), Math::mutable_data(*top[1]));
}

template <typename Dtype>
template <typename Math>
void LSTMUnitLayer<Dtype>::BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down,
                                        const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[2]) << this->describe()
                                     << ": cannot backpropagate to sequence indicators (bottom[2], cont)";
  if (!propagate_down[0] && !propagate_down[1]) return;
  Math::lstm_backward(bottom[0]->shape(1), H_, Math::data(*bottom[1]), Math::data(*bottom[0]), Math::data(*bottom[2]),
                      Math::data(*top[0]), Math::diff(*top[0]), Math::diff(*top[1]),
                      propagate_down[1] ? Math::mutable_diff(*bottom[1]) : nullptr,
                      propagate_down[0] ? Math::mutable_diff(*bottom[0]) : nullptr);
}

}  // namespace strata
