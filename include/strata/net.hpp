// Net: a prototxt turned into a DAG of layers and blobs, run forward and backward.
//
// Building it filters layers by phase/level/stage, inserts Split layers where a blob feeds several layers,
// wires in-place layers, shares parameters by name, and works out which layers need backward. Running it
// fires per-layer hooks, the seam where the gradient allreduce, K-FAC statistics and timing attach:
//   before_forward(i) -> layer i forward -> after_forward(i)        (RunLayerForward)
//   before_backward(i) -> layer i backward -> after_backward(i)     (RunLayerBackward)
// Forward and Backward run every layer in order, or hand the pass to an installed NetPassRunner (the recompute
// executor, strata/recompute/executor.hpp), which runs the layers through the same two functions.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/common.hpp"
#include "strata/layer.hpp"
#include "strata/net_pass_runner.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

template <typename Dtype>
class Net {
 public:
  // Whether nets built from now on fuse layers (Layer::Absorb): on unless STRATA_FUSE_LAYERS=0. Tests and
  // benchmarks turn it off to compare.
  static bool layer_fusion_enabled();
  static void set_layer_fusion_enabled(bool enabled);

  using LayerHook = std::function<void(int layer_id)>;

  // `param.state()` selects phase, level and stages; the data layers read `shard` of the data.
  explicit Net(const NetParameter& param, const DataShard& shard = DataShard());
  // Reads the prototxt at `filename` and builds it for `phase` (plus optional level and stages).
  Net(const std::string& filename, Phase phase, int level = 0, const std::vector<std::string>* stages = nullptr);
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Runs forward over all layers (or by the pass runner); `loss` (optional) receives the total weighted loss.
  const std::vector<Blob<Dtype>*>& Forward(Dtype* loss = nullptr);
  // Runs layers [start, end] inclusive and returns their loss.
  Dtype ForwardFromTo(int start, int end);
  // Runs backward over all layers, from the last (or by the pass runner).
  void Backward();
  // A backward that another follows on the same forward (K-FAC's true-Fisher statistics): a pass runner frees
  // only the gradients and what a recomputation rebuilds, so the next Backward finds every value it reads.
  void BackwardKeepingValues();
  // Runs backward of layers start down to end inclusive (start >= end).
  void BackwardFromTo(int start, int end);
  // One layer's forward with its hooks: before_forward(i), the layer's Forward, after_forward(i). Returns the
  // layer's weighted loss. ForwardFromTo adds what the plain pass does after it: a layer that rebuilds its
  // bottoms in backward lets go of them (RebuildsBottomsInBackward).
  Dtype RunLayerForward(int i);
  // One layer's backward with its hooks: before_backward(i), the layer's Backward when it needs one,
  // after_backward(i). BackwardFromTo then drops what no later backward reads (the rebuilt bottoms above).
  void RunLayerBackward(int i);
  Dtype ForwardBackward() {
    Dtype loss;
    Forward(&loss);
    Backward();
    return loss;
  }
  // Re-runs every layer's Reshape (after an input blob changed shape).
  void Reshape();

  // Zeroes all learnable parameters' gradients.
  void ClearParamDiffs();
  // Backward starts from every loss times `scale` (Layer::set_loss_scale); Forward's loss stays unscaled.
  void set_loss_scale(Dtype scale);
  // The scale backward starts from: every output gradient is this times the unscaled one (K-FAC divides it out).
  Dtype loss_scale() const { return loss_scale_; }
  // data -= diff for every owned parameter (the plain update; solvers compute diff first).
  void Update();
  // Makes this net's layers use `other`'s parameter blobs, for layers with the same name (test net <- train net).
  void ShareTrainedLayersWith(const Net* other);
  // Copies weights from a NetParameter (a caffemodel), matching layers by name; shapes must agree. Returns the
  // names of this net's layers with parameters that the weights left as they were (Caffe's partial fine-tuning:
  // the caller decides whether that is worth a warning). Weights that set no such layer at all (an empty file,
  // another net's weights) are an error naming the net.
  std::vector<std::string> CopyTrainedLayersFrom(const NetParameter& param);
  std::vector<std::string> CopyTrainedLayersFrom(const std::string& caffemodel_file);
  void ToProto(NetParameter* param, bool write_diff = false) const;

  // Hands every later Forward and Backward to `runner` (nullptr, the default: run all layers in order). The
  // runner must be made for this net (InstallRecomputePlan installs the recompute executor).
  void set_pass_runner(std::unique_ptr<NetPassRunner<Dtype>> runner) { runner_ = std::move(runner); }
  // The runner installed, or nullptr when Forward and Backward run the plain passes.
  const NetPassRunner<Dtype>* pass_runner() const { return runner_.get(); }

  // Hooks; each returns nothing and fires in registration order. `owner` (optional) names who added it, so that
  // RemoveHooks(owner) can take its hooks away when it goes (an engine that outlives nothing of the net's).
  void add_before_forward_hook(LayerHook h, const void* owner = nullptr) {
    before_forward_.push_back({owner, std::move(h)});
  }
  void add_after_forward_hook(LayerHook h, const void* owner = nullptr) {
    after_forward_.push_back({owner, std::move(h)});
  }
  void add_before_backward_hook(LayerHook h, const void* owner = nullptr) {
    before_backward_.push_back({owner, std::move(h)});
  }
  void add_after_backward_hook(LayerHook h, const void* owner = nullptr) {
    after_backward_.push_back({owner, std::move(h)});
  }
  // Removes every hook added with this owner.
  void RemoveHooks(const void* owner);

  const std::string& name() const { return name_; }
  Phase phase() const { return phase_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  const std::vector<std::shared_ptr<Blob<Dtype>>>& blobs() const { return blobs_; }
  const std::vector<std::shared_ptr<Layer<Dtype>>>& layers() const { return layers_; }
  const std::vector<std::vector<Blob<Dtype>*>>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<std::vector<Blob<Dtype>*>>& top_vecs() const { return top_vecs_; }
  const std::vector<std::vector<int>>& bottom_ids() const { return bottom_id_vecs_; }
  const std::vector<std::vector<int>>& top_ids() const { return top_id_vecs_; }
  const std::vector<std::vector<bool>>& bottom_need_backward() const { return bottom_need_backward_; }
  bool layer_need_backward(int i) const { return layer_need_backward_[i]; }
  const std::vector<Dtype>& blob_loss_weights() const { return blob_loss_weights_; }

  // Every parameter blob, shared ones included; param_owners()[i] is -1 for an owner, else the owner's index.
  const std::vector<std::shared_ptr<Blob<Dtype>>>& params() const { return params_; }
  const std::vector<int>& param_owners() const { return param_owners_; }
  const std::vector<std::string>& param_display_names() const { return param_display_names_; }
  // Owned (not shared) parameters: what a solver updates and what is reduced across ranks.
  const std::vector<Blob<Dtype>*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }
  // Whether learnable param `id` holds statistics updated by forward (BatchNorm) rather than learned weights.
  bool learnable_param_is_statistic(int id) const { return learnable_param_statistic_[id]; }
  // The learnable parameter ids whose gradients are final once backward of layer `layer_id` is done
  // (a shared parameter is final only after the lowest layer that uses it; an absorbed layer's, after the layer
  // that absorbed it: Layer::Absorb).
  const std::vector<int>& learnable_params_final_after(int layer_id) const { return final_after_[layer_id]; }
  // The layer whose update must be done before layer `layer_id` may run forward again: the learnable params
  // layer `layer_id` reads (with those of the layers it absorbed).
  const std::vector<int>& learnable_params_of_layer(int layer_id) const { return layer_learnable_ids_[layer_id]; }
  // Number of learnable values, counting each shared parameter once. BatchNorm statistics (lr_mult 0 by
  // Caffe's convention, updated by forward rather than by gradients) are excluded.
  size_t num_learnable_values() const;

  // The net's inputs, which the caller fills before Forward: the tops of its Input layers (Layer::IsNetInput).
  const std::vector<Blob<Dtype>*>& input_blobs() const { return net_input_blobs_; }
  const std::vector<int>& input_blob_ids() const { return net_input_blob_indices_; }
  // The blobs no layer consumes (losses, accuracies...), in blob id order.
  const std::vector<Blob<Dtype>*>& output_blobs() const { return net_output_blobs_; }
  const std::vector<int>& output_blob_ids() const { return net_output_blob_indices_; }
  // Records (images) per Forward: the first axis of the first top of the first layer that brings a batch into
  // the net (Layer::IsBatchSource: Input, Data); 1 for a scalar input, 0 when no layer brings one.
  int batch_size() const;
  bool has_blob(const std::string& name) const { return blob_names_index_.count(name) > 0; }
  std::shared_ptr<Blob<Dtype>> blob_by_name(const std::string& name) const;
  bool has_layer(const std::string& name) const { return layer_names_index_.count(name) > 0; }
  std::shared_ptr<Layer<Dtype>> layer_by_name(const std::string& name) const;
  int layer_index(const std::string& name) const;

  // Whether a layer survives the phase/level/stage rules of `state`.
  static bool StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer_name);
  static void FilterNet(const NetParameter& param, NetParameter* filtered);

 private:
  void Init(const NetParameter& param, const DataShard& shard);
  void AppendTop(const NetParameter& param, int layer_id, int top_id, std::map<std::string, int>* available);
  void LogGpuFormats() const;
  int AppendBottom(const NetParameter& param, int layer_id, int bottom_id, std::map<std::string, int>* available);
  void AppendParam(const NetParameter& param, int layer_id, int param_id);

  std::string name_;
  Phase phase_ = TEST;
  std::vector<std::shared_ptr<Layer<Dtype>>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_names_index_;
  std::vector<bool> layer_need_backward_;
  std::vector<std::shared_ptr<Blob<Dtype>>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_names_index_;
  std::vector<bool> blob_need_backward_;
  std::vector<std::vector<Blob<Dtype>*>> bottom_vecs_;
  std::vector<std::vector<int>> bottom_id_vecs_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  std::vector<std::vector<Blob<Dtype>*>> top_vecs_;
  std::vector<std::vector<int>> top_id_vecs_;
  std::vector<Dtype> blob_loss_weights_;
  Dtype loss_scale_ = 1;
  std::vector<std::vector<int>> param_id_vecs_;
  std::vector<int> param_owners_;
  std::vector<std::string> param_display_names_;
  std::vector<std::pair<int, int>> param_layer_indices_;
  std::map<std::string, int> param_names_index_;
  std::vector<int> net_input_blob_indices_;
  std::vector<int> net_output_blob_indices_;
  std::vector<Blob<Dtype>*> net_input_blobs_;
  std::vector<Blob<Dtype>*> net_output_blobs_;
  std::vector<std::shared_ptr<Blob<Dtype>>> params_;
  std::vector<Blob<Dtype>*> learnable_params_;
  std::vector<int> learnable_param_ids_;  // params_ index -> learnable index
  std::vector<float> params_lr_;
  std::vector<float> params_weight_decay_;
  std::vector<bool> learnable_param_statistic_;
  std::vector<std::vector<int>> final_after_;
  std::vector<std::vector<int>> layer_learnable_ids_;
  struct OwnedHook {
    const void* owner;
    LayerHook fn;
  };
  std::vector<OwnedHook> before_forward_, after_forward_, before_backward_, after_backward_;
  // Blobs a layer that rebuilds its bottoms (RebuildsBottomsInBackward) lets go of: dropped after that layer's
  // forward, and dropped again after the backward of the layer that produced them (their last reader).
  // The plain passes (ForwardFromTo, BackwardFromTo) drop them; a pass runner decides for itself.
  std::vector<std::vector<int>> drop_after_forward_, drop_after_backward_;
  std::unique_ptr<NetPassRunner<Dtype>> runner_;
};

}  // namespace strata
