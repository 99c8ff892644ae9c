#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/layer.hpp"
#include "strata/net.hpp"

namespace strata {

template <typename P>
struct Rows;  // src/strata/layers/coupling_math.hpp

// An additive-coupling block (NICE, RevNet; the seed document 003). The input's channels are split into m equal
// groups, the m most recent states x_0 (first channels, oldest) .. x_{m-1} (last, newest) of a sequence; each of
// the block's k steps appends one state
//   x_{t+m} = F_t(x_{t+1}, ..., x_{t+m-1}) + gamma * x_t          (t = 0 .. k-1)
// and the output is the m most recent states x_k .. x_{k+m-1}, oldest first. F_t is any sub-network (ordinary
// layers) that reads the m - 1 states after x_t concatenated along channels, oldest first, and writes a tensor
// of one state's shape. Because each step can be inverted,
//   x_t = (x_{t+m} - F_t(x_{t+1}, ..., x_{t+m-1})) / gamma,
// backward rebuilds the input (and the states between input and output) from the output instead of reading a
// stored copy, then recomputes each F_t on the rebuilt values and back-propagates through it. Nothing inside
// the F_t is kept between forward and backward, and the Net drops the block's input after forward
// (RebuildsBottomsInBackward), so a stack of blocks holds one block's activations at a time: activation memory
// stays flat in depth, for one extra forward of each F_t.
//
// reversible_param { streams: m gamma: g step { layer... } step { layer... } ... } writes the steps; f { layer... }
// g { layer... } are two steps, and with the defaults m = 2, gamma = 1 they are the RevNet block
//   y1 = x1 + F(x2),   y2 = x2 + G(y1),   top = [y1, y2].
//
// A sub-network reads its input from the one blob name it uses but does not produce, and its output is the top
// no layer of it reads. Their parameters are this layer's parameters (the first step's, then the next's: F's,
// then G's), learned as usual and final once this layer's backward is done. The recomputation replays the random
// numbers of the forward (Dropout draws the same mask) and puts back the statistics BatchNorm updated, so they
// are updated once.
//
// reversible_param.verify keeps the input (and the states between) anyway, back-propagates from the kept values,
// and reports the largest reconstruction error of each backward (reconstruction_error()).
template <typename Dtype>
class ReversibleLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Reversible"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return verify_; }
  bool BackwardNeedsTopData() const override { return true; }
  bool RebuildsBottomsInBackward() const override { return !verify_; }
  bool IsStochastic() const override;
  // Passed on to the steps' layers (a replay of the block replays them).
  void set_replaying(bool replaying) override;
  bool ParamIsStatistic(int param_id) const override { return statistic_[param_id]; }

  // The largest |rebuilt - stored| value of the input and the states between of the last backward (verify mode;
  // 0 otherwise).
  Dtype reconstruction_error() const { return reconstruction_error_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  // One step's F_t: its net, whose single input blob holds the m - 1 states it reads (concatenated along
  // channels, oldest first) and whose single output blob holds one state, image after image.
  struct Step {
    std::unique_ptr<Net<Dtype>> net;
    Blob<Dtype>* input = nullptr;
    Blob<Dtype>* output = nullptr;
    std::mt19937 rng_at_forward;  // the random engine as the forward found it, to replay it
  };

  Step BuildStep(const google::protobuf::RepeatedPtrField<LayerParameter>& layers, const std::string& which,
                 const std::vector<int>& window_shape, const std::vector<int>& state_shape);
  int num_steps() const { return static_cast<int>(steps_.size()); }
  // Where the block's m + k states x_0 .. x_{m+k-1} (values or gradients) are: `in` holds the input's (i < m),
  // `between` those neither input nor output (m <= i < k), `out` the output's (i >= max(m, k)).
  template <typename P>
  struct States {
    P in, between, out;
  };
  // State i (values or gradients) of every image.
  template <typename P>
  Rows<P> State(const States<P>& s, int i) const;
  // Output state i (k <= i < k+m) of every image in `out`.
  template <typename P>
  Rows<P> Output(P out, int i) const;
  // The passes, over the coupling's operations on one device (CpuCoupling, GpuCoupling: coupling_math.hpp).
  template <typename M>
  void ForwardWith(const BlobVec& bottom, const BlobVec& top);
  template <typename M>
  void BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);
  // Runs step t forward on its window, the states t+1 .. t+m-1 read from `s`; `replay` restores the forward's
  // random numbers and keeps the statistics its layers update unchanged.
  template <typename M>
  void RunForward(int t, const States<const Dtype*>& s, bool replay);
  // Frees every activation inside the step (they are recomputed in backward).
  static void DropActivations(Step& s);

  bool verify_ = false;
  int streams_ = 2;  // m
  Dtype gamma_ = 1;
  int outer_ = 0;    // images: the product of the axes before the channel axis
  long state_ = 0;   // values of one state of one image
  std::vector<Step> steps_;
  std::vector<bool> statistic_;
  Blob<Dtype> between_;     // the states between input and output (k > m): N x (k - m) states
  Blob<Dtype> kept_input_;  // verify mode: the input, and the input and states between rebuilt beside it
  Blob<Dtype> rebuilt_input_, rebuilt_between_;
  Dtype reconstruction_error_ = 0;
};

}  // namespace strata
