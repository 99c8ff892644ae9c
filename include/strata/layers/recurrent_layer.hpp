// The common part of Caffe's recurrent layers (RNN, LSTM): the bottoms and tops, the input transform, the
// recurrent state carried from one forward to the next, and the parameters. Caffe builds an unrolled Net for
// these; Strata computes them directly: one GEMM for the input transform of all T x N rows, then one GEMM per
// time step for the recurrence.
//
// Bottoms: x (T x N x ..., axis 0 time, axis 1 the independent streams, the rest one input vector),
//          cont (T x N, sequence continuation: 0 starts a new sequence, the state before it is dropped),
//          [x_static (N x ...), the same for every step], and with recurrent_param.expose_hidden the initial
//          states (1 x N x num_output each: h_0, and c_0 for LSTM).
// Tops:    the output (T x N x num_output), and with expose_hidden the final states (h_T, and c_T for LSTM).
// Without expose_hidden the final states of a forward are the initial states of the next one (zeros after setup
// or a change of N), as Caffe does; cont = 0 resets them. No gradient crosses from one forward to the previous.
// With expose_hidden, backward also gives the initial-state bottoms their gradient and takes the final-state tops'
// gradient into account. Caffe does neither: its unrolled net shares only the data of those blobs, so it leaves
// the h_0/c_0 diffs untouched and ignores the h_T/c_T diffs. Both behave the same when nothing reads h_T/c_T's
// gradient or writes one.
//
// Parameters, in Caffe's order (the owners of its unrolled net's parameters, in creation order), G the gate
// width (num_output for RNN, 4 num_output for LSTM), H = num_output:
//   W_x [G x input]  (weight_filler), b [G] (bias_filler), [W_x_static [G x static input] (weight_filler)],
//   W_h [G x H] (weight_filler), then the subclass's own (RNN: W_ho [H x H], b_o [H]).
#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

template <typename Dtype>
class RecurrentLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  // Zeroes the carried state: the next forward starts every stream from zero (Caffe's RecurrentLayer::Reset).
  void Reset();

  int MinBottomBlobs() const override { return 2 + (expose_hidden() ? NumStates() : 0); }
  int MaxBottomBlobs() const override { return MinBottomBlobs() + 1; }
  int ExactNumTopBlobs() const override { return 1 + (expose_hidden() ? NumStates() : 0); }
  // No gradient reaches the sequence continuation indicators.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }
  bool BackwardNeedsTopData() const override { return true; }

  // Without expose_hidden, forward reads the state the previous forward left and leaves its own: a re-run of the
  // same forward (the recompute executor's before backward, a reversible block's rebuild) must start from the
  // state the first run started from and must not advance it. ReplayForward tells the layer (set_replaying);
  // saying it is stochastic is what makes the recompute executor re-run it through ReplayForward. With
  // expose_hidden the caller passes the state in and nothing is kept.
  bool IsStochastic() const override { return !expose_hidden(); }
  void set_replaying(bool replaying) override { replaying_ = replaying; }
  typename Layer<Dtype>::CarriedState carried_state() override;

 protected:
  // 1 for RNN (h), 2 for LSTM (h, c): the states carried over, passed in and out with expose_hidden.
  virtual int NumStates() const = 0;
  // Rows of W_x and W_h: the width of the pre-activations computed from x and h.
  virtual int GateDim() const = 0;
  // Shapes of the subclass's parameters after W_h (RNN's output layer), and whether each is a bias (filled by
  // bias_filler rather than weight_filler).
  virtual std::vector<std::vector<int>> ExtraParamShapes() const { return {}; }
  virtual std::vector<bool> ExtraParamIsBias() const { return {}; }

  bool expose_hidden() const { return this->layer_param_.recurrent_param().expose_hidden(); }
  int static_index() const { return 2; }                           // x_static, when static_input_
  int state_bottom(int s) const { return 2 + static_input_ + s; }  // h_0 / c_0 with expose_hidden
  int w_h_index() const { return static_input_ ? 3 : 2; }          // W_h among the parameters
  int extra_index() const { return w_h_index() + 1; }              // the subclass's first parameter

  // Device-generic pieces both layers use; `Math` is CpuMath or GpuMath (src/strata/layers/recurrent_math.hpp).
  // Marks the start of a forward: chooses the initial states (see IsStochastic) and returns them, N x H each.
  template <typename Math>
  std::vector<const Dtype*> BeginForward(const BlobVec& bottom);
  // Keeps the final states (N x H each, in the layer's buffers) for the next forward, or writes them to the
  // expose_hidden tops.
  template <typename Math>
  void EndForward(const std::vector<const Dtype*>& final_states, const BlobVec& top);
  // pre = x W_x^T + b (+ x_static W_x_static^T at every step): T*N x G, into gates_'s data.
  template <typename Math>
  void InputTransform(const BlobVec& bottom);
  // pre_t += (cont_t * h_prev) W_h^T for step t.
  template <typename Math>
  void RecurrentForward(int t, const Dtype* cont, const Dtype* h_prev, Dtype* pre_t);
  // Given d pre_t (N x G): dW_h += d pre_t^T (cont_t * h_prev), and dh_prev = cont_t * (d pre_t W_h).
  template <typename Math>
  void RecurrentBackward(int t, const Dtype* cont, const Dtype* h_prev, const Dtype* dpre_t, Dtype* dh_prev);
  // From d pre (gates_'s diff, T*N x G): the gradients of W_x, b, W_x_static, x and x_static.
  template <typename Math>
  void InputTransformBackward(const BlobVec& bottom, const std::vector<bool>& propagate_down);
  // The gradient reaching the initial state s goes to its bottom with expose_hidden (and is dropped
  // otherwise: Caffe does not back-propagate across batches).
  bool InitialStateWanted(int s, const std::vector<bool>& propagate_down) const {
    return expose_hidden() && propagate_down[state_bottom(s)];
  }
  template <typename Math>
  void InitialStateBackward(int s, const Dtype* d_state, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom);

  // Throws when asked for a gradient to cont (Caffe refuses it too).
  void CheckNoContGradient(const std::vector<bool>& propagate_down) const;

  int T_ = 0;           // time steps
  int N_ = 0;           // independent streams
  int H_ = 0;           // num_output: the hidden state's width
  int input_dim_ = 0;   // values per step and stream in x
  int static_dim_ = 0;  // values per stream in x_static
  bool static_input_ = false;

  Blob<Dtype> gates_;               // T x N x G pre-activations (their diff holds the gradients in backward)
  Blob<Dtype> static_gates_;        // N x G: x_static W_x_static^T (diff: its gradient, summed over the steps)
  Blob<Dtype> conted_;              // N x H scratch: cont_t * h_{t-1}
  Blob<Dtype> state0_[2];           // the initial states of the last forward (without expose_hidden)
  Blob<Dtype> stateT_[2];           // its final states: the next forward's initial states
  Blob<Dtype> carry_[2];            // N x H scratch in backward: the gradients flowing to the previous step
  int state_streams_ = -1;          // the N the carried state was kept for (-1: none yet)
  bool replaying_ = false;          // set_replaying: forward repeats the last one (state0_, stateT_ kept)
};

}  // namespace strata
