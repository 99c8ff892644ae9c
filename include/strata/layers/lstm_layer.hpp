// Caffe's LSTM and LSTMUnit layers.
#pragma once

#include <vector>

#include "strata/layers/recurrent_layer.hpp"

namespace strata {

// Long short-term memory over T steps (bottoms, tops and parameters: RecurrentLayer). For every step t, with
// H = num_output and the gates laid out [i | f | o | g] (4H):
//   pre_t = W_xc x_t + b_c (+ W_xc_static x_static) + W_hc (cont_t * h_{t-1})
//   c_t, h_t = the LSTMUnit step of (c_{t-1}, pre_t, cont_t)      (src/strata/layers/lstm_cell.hpp)
// The output is h_1 ... h_T. Parameters: W_xc [4H x input], b_c [4H], [W_xc_static [4H x static]], W_hc [4H x H].
// It keeps the pre-activations and the cells of every step for backward (and reads its output h).
template <typename Dtype>
class LSTMLayer : public RecurrentLayer<Dtype> {
 public:
  using typename RecurrentLayer<Dtype>::BlobVec;
  using RecurrentLayer<Dtype>::RecurrentLayer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "LSTM"; }
  std::vector<Blob<Dtype>*> SavedActivations() override { return {&this->gates_, &cells_}; }

 protected:
  int NumStates() const override { return 2; }
  int GateDim() const override { return 4 * this->H_; }

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

  Blob<Dtype> cells_;  // T x N x H: c_1 ... c_T
  Blob<Dtype> dh_;     // N x H scratch in backward: the gradient reaching h_t
};

// One LSTM step, on its own. Bottoms: c_prev (1 x N x H), x (1 x N x 4H, the gate pre-activations [i|f|o|g]),
// cont (1 x N). Tops: c (1 x N x H), h (1 x N x H):
//   i = sigmoid(x_i), f = cont * sigmoid(x_f), o = sigmoid(x_o), g = tanh(x_g), c = f c_prev + i g, h = o tanh(c)
// No gradient reaches cont.
template <typename Dtype>
class LSTMUnitLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "LSTMUnit"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }
  bool BackwardNeedsTopData() const override { return true; }  // reads c

 protected:
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

  int H_ = 0;  // hidden units per stream
};

}  // namespace strata
