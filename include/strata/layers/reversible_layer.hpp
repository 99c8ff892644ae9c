#pragma once

#include <memory>
#include <random>
#include <vector>

#include "strata/layer.hpp"
#include "strata/net.hpp"

namespace strata {

// An additive-coupling block (NICE, RevNet): the input's channels are split in two halves x1, x2 and
//   y1 = x1 + F(x2),   y2 = x2 + G(y1),   top = [y1, y2]
// where F and G are any sub-networks (reversible_param { f { layer... } g { layer... } }) that map a half to a
// tensor of the same shape. Because the block can be inverted,
//   x2 = y2 - G(y1),   x1 = y1 - F(x2),
// backward rebuilds its input from its output instead of reading a stored copy, then recomputes F and G on the
// rebuilt values and back-propagates through them. Nothing inside F or G is kept between forward and backward,
// and the Net drops the block's input after forward (RebuildsBottomsInBackward), so a stack of blocks holds one
// block's activations at a time: activation memory stays flat in depth, for one extra forward of F and G.
//
// The sub-networks read their input from the one blob name they use but do not produce, and their output is the
// top of their last layer. Their parameters are this layer's parameters (F's, then G's), learned as usual and
// final once this layer's backward is done. The recomputation replays the random numbers of the forward
// (Dropout draws the same mask) and puts back the statistics BatchNorm updated, so they are updated once.
//
// reversible_param.verify keeps the input anyway, back-propagates from the kept values, and reports the
// largest reconstruction error of each backward (reconstruction_error()).
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
  // Passed on to the branches' layers (a replay of the block replays them).
  void set_replaying(bool replaying) override;
  bool ParamIsStatistic(int param_id) const override { return statistic_[param_id]; }

  // The largest |rebuilt - stored| input value of the last backward (verify mode; 0 otherwise).
  Dtype reconstruction_error() const { return reconstruction_error_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;

 private:
  // One of F and G: its net, whose single input and output blobs hold half of the block's channels.
  struct Branch {
    std::unique_ptr<Net<Dtype>> net;
    Blob<Dtype>* input = nullptr;
    Blob<Dtype>* output = nullptr;
    std::mt19937 rng_at_forward;  // the random engine as the forward found it, to replay it
  };

  Branch BuildBranch(const google::protobuf::RepeatedPtrField<LayerParameter>& layers, const char* which,
                     const std::vector<int>& half_shape);
  // Runs the branch forward on `in` (half_ values); `replay` restores the forward's random numbers and keeps the
  // statistics its layers update unchanged.
  void RunForward(Branch& b, const Dtype* in, bool replay);
  // Frees every activation inside the branch (they are recomputed in backward).
  static void DropActivations(Branch& b);

  bool verify_ = false;
  int outer_ = 0;  // images: the product of the axes before the channel axis
  long half_ = 0;  // values of one half of one image
  Branch f_, g_;
  std::vector<bool> statistic_;
  Blob<Dtype> kept_input_;  // verify mode
  Dtype reconstruction_error_ = 0;
};

}  // namespace strata
