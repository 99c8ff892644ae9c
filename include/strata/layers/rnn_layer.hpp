// Caffe's RNN layer.
#pragma once

#include <vector>

#include "strata/layers/recurrent_layer.hpp"

namespace strata {

// A simple (Elman) recurrent network over T steps (bottoms, tops and parameters: RecurrentLayer). For every
// step t, with H = num_output:
//   h_t = tanh(W_hh (cont_t * h_{t-1}) + W_xh x_t + b_h (+ W_xh_static x_static))
//   o_t = tanh(W_ho h_t + b_o)
// The output is o_1 ... o_T; the state carried (and exposed with expose_hidden) is h. Parameters: W_xh
// [H x input], b_h [H], [W_xh_static [H x static]], W_hh [H x H], W_ho [H x H], b_o [H]. It keeps the
// pre-activations and h of every step for backward (and reads its output o).
template <typename Dtype>
class RNNLayer : public RecurrentLayer<Dtype> {
 public:
  using typename RecurrentLayer<Dtype>::BlobVec;
  using RecurrentLayer<Dtype>::RecurrentLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "RNN"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&this->gates_, &hidden_}; }

 protected:
  int NumStates() const override { return 1; }
  int GateDim() const override { return this->H_; }
  std::vector<std::vector<int>> ExtraParamShapes() const override { return {{this->H_, this->H_}, {this->H_}}; }
  std::vector<bool> ExtraParamIsBias() const override { return {false, true}; }

  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif
  template <typename Math>
  void ForwardWith(const BlobVec& bottom, const BlobVec& top);
  template <typename Math>
  void BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  Blob<Dtype> hidden_;  // T x N x H: h_1 ... h_T (its diff holds their gradients in backward)
};

}  // namespace strata
