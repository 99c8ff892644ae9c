// The layer contract. A layer owns its parameters (blobs()), sets up and reshapes its outputs from its
// inputs, and computes Forward (bottom -> top) and Backward (top diff -> bottom diff and parameter diffs).
// CPU and GPU variants sit side by side; a layer without a GPU variant runs its CPU code.
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/common.hpp"
#include "strata/math_functions.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

// The share of the data a net reads: shard `index` of `count`. Data layers take every count-th batch of the
// whole job's stream (prefetching_data_layer.hpp); who builds the net decides it (Solver: its engine's replica).
struct DataShard {
  int index = 0;
  int count = 1;
};

template <typename Dtype>
class Layer {
 public:
  using BlobVec = std::vector<Blob<Dtype>*>;

  explicit Layer(const LayerParameter& param);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks blob counts, runs LayerSetUp and Reshape, and sets up loss weights. Called once by Net.
  void SetUp(const BlobVec& bottom, const BlobVec& top);

  // One-time setup: read parameters, create and fill learnable blobs.
  virtual void LayerSetUp(const BlobVec& bottom, const BlobVec& top) {}
  // Shapes the tops (and internal buffers) from the bottoms. Called before every Forward whose input shape
  // may have changed.
  virtual void Reshape(const BlobVec& bottom, const BlobVec& top) = 0;

  // Computes the tops and returns this layer's weighted loss.
  Dtype Forward(const BlobVec& bottom, const BlobVec& top);
  // Computes the gradient for the bottoms whose propagate_down is true, and the parameter gradients
  // (accumulated into their diff) for params whose param_propagate_down is true.
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  std::vector<std::shared_ptr<Blob<Dtype>>>& blobs() { return blobs_; }
  const LayerParameter& layer_param() const { return layer_param_; }
  // Writes the layer's parameters (and their gradients when asked) into `param`.
  virtual void ToProto(LayerParameter* param, bool write_diff = false);

  Dtype loss(int top_index) const { return (loss_.size() > top_index) ? loss_[top_index] : Dtype(0); }
  void set_loss(int top_index, Dtype value);
  // Backward starts from each loss top's weight times `scale` (loss scaling: Optimizer), which Forward's loss
  // divides out again. `top` is the layer's tops, as in SetUp.
  void set_loss_scale(Dtype scale, const BlobVec& top);

  virtual const char* type() const { return ""; }

  // Blob-count contracts, checked in SetUp. -1 means "no constraint".
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, Net creates anonymous tops up to the minimum count the layer needs.
  virtual bool AutoTopBlobs() const { return false; }
  // Whether force_backward may make this bottom get a gradient (false for labels, for instance).
  virtual bool AllowForceBackward(int bottom_index) const { return true; }

  // What a layer is to the code around it, so that Net, the recompute planner, solvers and tools ask the layer
  // rather than compare type() strings.
  // True when the layer computes in 16 bits: its precision is BF16 (or, on the GPU, FP16) and it and the device have
  // the kernels (on the CPU, oneDNN's bfloat16 multiplications: docs/onednn.md; on the GPU, activations in
  // GpuPrecision()'s type: docs/gpu.md); a layer asked for a 16-bit precision without them computes in float.
  virtual bool ComputesIn16Bit() const { return false; }
  // The order a layer keeps its activations in on the GPU (docs/gpu.md, "Channels-last"): convolutions make them
  // channels-last (NHWC) where gpu_options() asks it, the layers with channels-last GPU code after them keep the
  // order of their first bottom (in the element type they compute in), and every other layer reads them
  // channels-first, converting. Net reports where they convert; the layers' passes apply the rule.
  enum class GpuOrder { kChannelsFirst, kFollowsBottom, kMakesChannelsLast };
  virtual GpuOrder GpuActivationOrder() const { return GpuOrder::kChannelsFirst; }
  // Whether top `index` holds indices (Pooling's mask): written plain on the GPU, in float and channels-first,
  // whatever format the layer's other tops are in.
  virtual bool TopHoldsIndices(int index) const { return false; }
  // Whether a layer writes top `index` in 16 bits on the GPU: every top of a layer that computes in them but one of
  // indices.
  bool WritesTopIn16Bit(int index) const { return ComputesIn16Bit() && !TopHoldsIndices(index); }
  // True for layers that bring a batch into the net (Input, Data): no bottoms, and the first axis of their first
  // top is the batch (Net::batch_size).
  virtual bool IsBatchSource() const { return false; }
  // True for layers whose tops the caller fills before Forward (Input): they are the net's input_blobs(), and
  // nothing but the caller may discard them.
  virtual bool IsNetInput() const { return false; }
  // True for Split, which hands its one bottom to several consumers: every top shares the bottom's data, and
  // backward sums the tops' gradients into the bottom's. Net inserts it where a blob feeds several layers; it is
  // not part of the model (Net::ToProto leaves it out).
  virtual bool IsSplit() const { return false; }
  // The bottom that holds class labels, indices into the classes that bottom 0 scores along its axis 1
  // (SoftmaxWithLoss, Accuracy: 1); -1 when the layer reads no labels.
  virtual int LabelBottom() const { return -1; }

  // What backward reads, for the recompute planner and blob lifetimes (docs/recompute.md): a layer whose backward
  // needs neither its bottom data nor its top data lets both be freed early. A layer that says nothing is taken to
  // read both (a user's or a Python layer); every layer of Strata's says, and the gradient checker holds it to it.
  virtual bool BackwardNeedsBottomData() const { return true; }
  virtual bool BackwardNeedsTopData() const { return true; }
  // Whether backward is still exact when the layer runs in place (a top is its bottom, which forward overwrites):
  // when it reads no bottom data, or keeps its own copy of the input (PReLU, Scale, Swish). Net refuses an
  // in-place layer that runs backward without it.
  virtual bool BackwardWorksInPlace() const { return !BackwardNeedsBottomData(); }
  // True for layers whose backward rebuilds their bottoms' data from their tops (reversible blocks): the Net
  // may drop such a bottom after forward when this layer is its only reader, and drops it again once the
  // layer that produced it is done with backward.
  virtual bool RebuildsBottomsInBackward() const { return false; }
  // The activation-sized buffers the layer keeps from forward for its backward (BatchNorm's normalised input,
  // pooling's argmax, dropout's mask...), empty when its configuration keeps none. The recompute planner
  // counts their bytes; ReleaseActivations frees them for callers that run forward again before the backward
  // (reversible blocks, recomputation) or whose backward is done, and the next forward allocates them again.
  virtual std::vector<Blob<Dtype>*> SavedActivations() { return {}; }
  // Those of them a layer that computes in 16 bits on the GPU keeps in 16 bits (BatchNorm's normalised input); the
  // rest stay Dtype. For the planner's byte counts.
  virtual std::vector<const Blob<Dtype>*> SavedIn16BitOnGpu() const { return {}; }
  void ReleaseActivations() {
    for (Blob<Dtype>* b : SavedActivations()) b->release_memory();
  }
  // True for layers whose forward consumes random numbers (Dropout) or updates state (BatchNorm in TRAIN):
  // the recompute executor replays them.
  virtual bool IsStochastic() const { return false; }
  // While set, Forward repeats the layer's last forward rather than taking a step: a layer whose forward carries
  // state to the next call (RNN and LSTM keep their final hidden state) starts again from the state the last
  // forward started from and leaves the carried state alone. ReplayForward sets it around its re-run (such
  // layers also say IsStochastic(), so the recompute executor re-runs them that way); so does a finite-difference
  // check, whose perturbed forwards all repeat the first one.
  virtual void set_replaying(bool replaying) {}
  // That carried state (empty for layers that carry none): `start`, what the last forward started from (where a
  // replay starts); `next`, what the next forward starts from. A caller running a net's forwards on several copies
  // of it hands `next` on from copy to copy, and one replaying an older forward puts that forward's start back.
  struct CarriedState {
    std::vector<Blob<Dtype>*> start, next;
  };
  virtual CarriedState carried_state() { return {}; }

  // Layers that read a stream of records (Data) report where the stream stands and can restart there, so a
  // resumed run sees exactly the batches an uninterrupted one would: the solver keeps this in its solverstate.
  struct RecordStream {
    uint64_t position = 0;  // records consumed by Forward so far (the layer's own numbering)
    uint64_t seed = 0;      // what the layer's random transforms (crop, mirror) are drawn from
  };
  virtual bool has_record_stream() const { return false; }
  virtual RecordStream record_stream() const { return {}; }
  virtual void set_record_stream(const RecordStream& stream) {}

  // Layouts (memory_format.hpp). True for layers that read their bottoms in whatever layout they are in and write
  // the bottoms' gradients in the bottoms' layout, so that the layer producing a bottom may leave it blocked
  // (Net asks after SetUp). Such a layer writes a top blocked only where top_may_block(i) says so: Net sets it for
  // tops that every reader accepts blocked and that are not outputs of the net.
  virtual bool AcceptsBlockedBottoms() const { return false; }
  bool top_may_block(int top_index) const {
    return top_index < static_cast<int>(top_may_block_.size()) && top_may_block_[top_index];
  }
  void set_top_may_block(std::vector<bool> may_block) { top_may_block_ = std::move(may_block); }

  // Fusion (Net, when layer_fusion_enabled()): a layer may absorb the layer right after it, which then reads and
  // writes exactly this layer's one top in place and needs backward exactly when this one does. Absorb returns
  // whether it took `next`'s forward (BatchNorm takes a Scale and a ReLU after it, a sum a ReLU, a convolution on
  // oneDNN a ReLU); AbsorbsBackward whether it computes the absorbed layers' backward inside its own too (one pass
  // instead of several: BatchNorm, a sum) or leaves it to them (a convolution: the ReLU's gradient is a pass of its
  // own either way, so keeping it in the ReLU's slot costs nothing and lets the hooks on the convolution see the
  // gradient of its own output, as K-FAC's factors need). Forward and Backward skip what was absorbed; Net fires
  // the hooks of every layer as without fusion.
  virtual bool Absorb(Layer<Dtype>& next) { return false; }
  virtual bool AbsorbsBackward() const { return true; }
  // Whether this layer's forward, and whether its backward, is done inside the layer that absorbed it.
  bool absorbed() const { return absorbed_; }
  bool backward_absorbed() const { return backward_absorbed_; }
  void set_absorbed(bool forward, bool backward) {
    absorbed_ = forward;
    backward_absorbed_ = forward && backward;
  }

  // True for parameter blobs that hold statistics updated by forward (BatchNorm's mean, variance and
  // scale factor) rather than weights learned by gradient: not counted as learnable, never decayed.
  virtual bool ParamIsStatistic(int param_id) const { return false; }

  bool param_propagate_down(int param_id) const {
    return param_id < static_cast<int>(param_propagate_down_.size()) && param_propagate_down_[param_id];
  }
  void set_param_propagate_down(int param_id, bool value);

  Phase phase() const { return phase_; }

  // The shard a data layer reads, handed over by Net before SetUp (a data layer reads it in LayerSetUp).
  void set_data_shard(const DataShard& shard);
  const DataShard& data_shard() const { return data_shard_; }

 protected:
  virtual void Forward_cpu(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual void Forward_gpu(const BlobVec& bottom, const BlobVec& top) { Forward_cpu(bottom, top); }
  virtual void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) = 0;
  virtual void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
    Backward_cpu(top, propagate_down, bottom);
  }

  // The rule of every layer with 16-bit GPU code: a float layer asked for precision: BF16 (FP16), run in GPU mode on
  // a device with bfloat16 (float16) arithmetic, reads and writes its activations in that type (docs/gpu.md,
  // "bfloat16" and "float16"); kOwn otherwise.
  ElementType GpuPrecision() const;
  // The element type the layer's GPU passes store its activations in: GpuPrecision() where the layer computes in
  // 16 bits (ComputesIn16Bit), its own type otherwise.
  ElementType GpuStorage() const { return ComputesIn16Bit() ? GpuPrecision() : ElementType::kOwn; }

  // For layers that map each value on its own (ReLU, BatchNorm, Scale, Eltwise's sum): the layout forward runs in.
  // Blocked when a bottom is (the others are then converted) and top 0 may be, or is bottom 0 itself; otherwise
  // plain. Backward runs in the layout forward ran in.
  MemoryFormat ElementwiseLayout(const BlobVec& bottom, const BlobVec& top) const {
    bool any_blocked = false;
    for (const Blob<Dtype>* b : bottom) any_blocked = any_blocked || b->data_layout() == MemoryFormat::kBlocked16;
    const bool blocked = any_blocked && (bottom[0] == top[0] || top_may_block(0));
    return blocked ? MemoryFormat::kBlocked16 : MemoryFormat::kPlain;
  }

  // Throws a clear Error when the blob counts break the contract.
  void CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const;
  // "layer 'conv1' (Convolution)" for messages.
  std::string describe() const;

  LayerParameter layer_param_;
  Phase phase_;
  std::vector<std::shared_ptr<Blob<Dtype>>> blobs_;
  std::vector<bool> param_propagate_down_;
  std::vector<Dtype> loss_;

 private:
  void SetLossWeights(const BlobVec& top);
  Dtype loss_scale_ = 1;
  std::vector<bool> top_may_block_;
  DataShard data_shard_;
  bool absorbed_ = false;
  bool backward_absorbed_ = false;
};

// Runs `forward` (the layers' Forward, or a net's over them) once more as it ran before: the random engine
// starts where it stood then (`engine_then`) and is put back afterwards, and the statistics the layers update in
// forward (ParamIsStatistic blobs: BatchNorm's running mean and variance) are restored, and the layers are told
// they are replaying (set_replaying), so a re-run changes nothing but the outputs: Dropout draws the same mask,
// BatchNorm's statistics move once per iteration, an LSTM starts from the state it started from. The
// recompute executor and reversible blocks both re-run forward this way.
template <typename Dtype, typename ForwardFn>
void ReplayForward(const std::vector<std::shared_ptr<Layer<Dtype>>>& layers, const std::mt19937& engine_then,
                   ForwardFn forward) {
  // Saved where they are (Blob::CopyFrom copies on the device in GPU mode): no round trip to the host per replay.
  std::vector<Blob<Dtype>*> statistics;
  std::vector<std::unique_ptr<Blob<Dtype>>> saved;
  for (const auto& l : layers) {
    for (size_t i = 0; i < l->blobs().size(); ++i) {
      if (!l->ParamIsStatistic(static_cast<int>(i))) continue;
      Blob<Dtype>* s = l->blobs()[i].get();
      statistics.push_back(s);
      saved.push_back(std::make_unique<Blob<Dtype>>());
      saved.back()->CopyFrom(*s, false, true);
    }
  }
  const std::mt19937 engine_now = Strata::rng();
  Strata::rng() = engine_then;
  for (const auto& l : layers) l->set_replaying(true);
  forward();
  for (const auto& l : layers) l->set_replaying(false);
  Strata::rng() = engine_now;
  for (size_t k = 0; k < statistics.size(); ++k) statistics[k]->CopyFrom(*saved[k]);
}

}  // namespace strata
