// Optimizer: how a net's reduced gradients become a step of its weights: the update rule, its state (the history
// blobs) and the stages before it, apart from the loop (Solver: iterations, tests, snapshots) and from how the
// gradients are computed and reduced (TrainingEngine). The engines call it with the rate and iteration they are
// given; the loop saves and restores its state.
//
// For each learnable param, in every path:
//   scale by gradient_scale() (1 / (replicas x iter_size x loss scale)) -> regularise (L2/L1 weight decay x
//   decay_mult) -> the rule (SGD momentum, Nesterov, Adam...) -> data -= step
// Apply(rate, iter) does it for the whole net (after clipping, or after a GradientStage such as K-FAC's
// preconditioning); UpdateLayer for one layer's params (the data-parallel engine, as each layer's gradient is
// reduced); UpdateSlice for a range of one param's elements in one sweep over memory (OnePassUpdate).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/net.hpp"
#include "strata/proto/strata.pb.h"
#include "strata/solvers/loss_scaler.hpp"

namespace strata {

class Collectives;

// A stage that rewrites the whole net's gradient before the rule (K-FAC's preconditioning, docs/kfac.md) and may
// gather statistics during the iteration's forward and backward (through the net's hooks) and run a backward of
// its own between them.
template <typename Dtype>
class GradientStage {
 public:
  virtual ~GradientStage() = default;
  virtual const char* type() const = 0;
  // The iteration whose forward and backward run next (statistics are collected by iteration).
  virtual void BeginIteration(int iter) {}
  // Between the forward and the backward of pass `pass` of the iteration.
  virtual void BeforeBackward(int pass) {}
  // True while the stage runs a backward of its own: its gradients are not the iteration's.
  virtual bool in_statistics_pass() const { return false; }
  // Reduces the statistics the iteration collected across the replicas, first in Apply on every rank (it may be
  // collective): whether they are all finite, the same answer on every rank. A dynamic loss scale skips the step
  // when they are not, as for a gradient that is not (the scaled backward overflowed).
  virtual bool ReduceStatistics(int iter) { return true; }
  // Rewrites the gradients of the whole net, already scaled to the mean and clipped, before the rule.
  // `gradient_scale` is what they were scaled by (for statistics the stage kept unscaled).
  virtual void Precondition(Dtype rate, int iter, Dtype gradient_scale) = 0;
  // Collectives over the replicas (null: one rank), from the engine.
  virtual void set_collectives(Collectives* collectives) {}
  // Collectives over the ranks that hold the other parts of the model (Optimizer::set_model_parts); null: none.
  virtual void set_model_parts(Collectives* parts) {}
  // Another net sharing this net's params whose backwards are the iteration's too (a pipeline stage's copy for a
  // micro-batch in flight): the stage watches it as it watches the net, until RemoveNetCopy, before it is destroyed.
  virtual void AddNetCopy(Net<Dtype>* copy) {}
  virtual void RemoveNetCopy(Net<Dtype>* copy) {}
  // What the stage keeps between iterations, into a solverstate: every rank calls it (its state may be spread over
  // the ranks, and is gathered), and rank 0's `state` receives it. Restore: every rank takes back its own part.
  virtual void SaveState(SolverState* state) {}
  virtual void RestoreState(const SolverState& state, const std::string& origin) {}

  // Each layer's share of the stage's own work (per layer id of its net; 0 where it does none), for the pipeline's
  // planner, which adds it to the layers' times and sizes: milliseconds per pass (what a forward or backward
  // collects), per update (what the step does once per iteration), both averaged over the stage's intervals, and
  // the bytes the stage holds for the layer. Measured over `passes` forward-backward passes of the stage's own on
  // a net built for planning: they leave the stage's statistics as the passes made them.
  struct LayerCosts {
    std::vector<double> per_pass_ms, per_update_ms, bytes;
  };
  virtual LayerCosts MeasureLayerCosts(int passes) { return {}; }
};

template <typename Dtype>
class Optimizer {
 public:
  Optimizer(const SolverParameter& param, Net<Dtype>* net);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The solver type: "SGD", "Adam", ..., "KFAC" (a stage before SGD).
  const char* type() const { return stage_ ? stage_->type() : rule_type(); }

  // ---- what the engines call, with the rate and iteration of the iteration they run ----
  // First in every iteration, before its forward.
  void BeginIteration(int iter);
  // Between the forward and the backward of each pass (K-FAC's true-Fisher backward).
  void BeforeBackward(int pass);
  // True while a stage runs a backward of its own: hooks that ship gradients must leave them alone.
  bool in_statistics_pass() const { return stage_ && stage_->in_statistics_pass(); }
  // Updates every learnable param of the net (what one rank does after backward).
  void Apply(Dtype rate, int iter);
  // Updates the learnable params whose gradients are final after layer `layer_id`'s backward. Safe to call
  // concurrently for different layers; never with needs_whole_gradient().
  void UpdateLayer(int layer_id, Dtype rate, int iter);
  // Whether the update needs the whole reduced gradient at once (gradient clipping; a stage such as K-FAC's; a
  // dynamic loss scale, which skips the whole step when any gradient is not finite): then engines reduce every
  // layer and call Apply, never UpdateLayer.
  bool needs_whole_gradient() const {
    return param_.clip_gradients() >= 0 || stage_ != nullptr || loss_scaler_.dynamic();
  }
  // The loss scale the next backward starts from (loss_scale; 1 without).
  double loss_scale() const { return loss_scaler_.scale(); }
  // Iterations whose update a dynamic loss scale skipped (their gradient was not finite), since construction.
  int skipped_iterations() const { return skipped_iterations_; }
  // Whether the last Apply left every gradient at zero (one-pass updates): the next iteration need not clear them.
  bool gradients_zeroed() const { return gradients_zeroed_; }

  // What a one-pass update does before the rule: g <- grad_scale * g + weight decay.
  struct OnePassStep {
    Dtype grad_scale;
    Dtype decay;  // weight_decay x the param's decay_mult
    bool l1;      // regularization_type "L1": decay x sign(w), else decay x w
  };
  // The one-pass update on the CPU: for elements [begin, end) of learnable param `param_id`, the gradient is
  // scaled by `grad_scale` (gradient_scale() in training) and regularised, the rule advances its history and
  // moves the weights, and the gradient is left at zero, all in one sweep over memory (normalise, regularise,
  // the rule and Blob::Update would take five). The data-parallel engine runs it on each chunk right after the
  // chunk's allreduce, while the chunk is still in cache. Only with has_one_pass_update(); safe to call
  // concurrently on disjoint ranges.
  void UpdateSlice(int param_id, size_t begin, size_t end, Dtype rate, int iter, Dtype grad_scale);
  // Whether the rule has a one-pass CPU sweep (the SGD family) and no stage rewrites the gradient first.
  bool has_one_pass_update() const { return !stage_ && rule_has_one_pass(); }
  // Whether updates take the one-pass path now: a one-pass rule, and the weights on the CPU.
  bool updates_in_one_pass() const;
  // Makes the CPU copies of the history and of the params' values and gradients exist now. SyncedMemory
  // allocates lazily and is not thread-safe, so threads that call UpdateSlice on slices of one param must not be
  // the first to touch it (two would each allocate a history, and one's updates would be lost).
  void AllocateUpdateState();
  // Brings param `param_id`'s gradient and history into the layout its value is in (a layer may keep its weights
  // in oneDNN's order, memory_format.hpp's CustomFormat), so that the update's elementwise sweeps read all of them
  // alike. The update paths call it; the data-parallel engine calls it on its main thread before threads update
  // slices of the param (a conversion is not thread-safe, and is then already done).
  void AlignLayouts(int param_id);

  // ---- what the loop sets up ----
  // The engine's replicas: every reduced gradient is a sum over `replicas` replicas of iter_size passes, each
  // started from the loss times the loss scale, so the update multiplies it by gradient_scale() =
  // 1 / (replicas x iter_size x loss scale), the one place this is computed.
  void set_replicas(int replicas);
  Dtype gradient_scale() const { return gradient_scale_; }
  // Collectives over the replicas for stages that communicate more than the gradient (K-FAC); null: one rank.
  void set_collectives(Collectives* collectives);
  // Collectives over the ranks that hold the other parts of this rank's model (a pipeline replica's stages), for
  // what spans the whole gradient: clipping's norm and a dynamic loss scale's finiteness. Null: this rank holds
  // all of it (replicas hold copies, not parts).
  void set_model_parts(Collectives* parts);
  // A copy of the net sharing its params, whose backwards add into the same gradient (a pipeline stage's, one per
  // micro-batch in flight), for the stage's statistics; removed before the copy is destroyed.
  void AddNetCopy(Net<Dtype>* copy) {
    if (stage_) stage_->AddNetCopy(copy);
  }
  void RemoveNetCopy(Net<Dtype>* copy) {
    if (stage_) stage_->RemoveNetCopy(copy);
  }
  // The rule's state into a solverstate (its history blobs, in Caffe's order), and back. Restore checks that the
  // state fits this net and rule; `origin` (the file) prefixes its errors. The stage's state is saved apart, by
  // SaveStageState: it is collective (every rank calls it; rank 0's `state` receives it), where the history is
  // written by rank 0 alone. RestoreState restores both, on every rank.
  void SaveState(SolverState* state) const;
  void SaveStageState(SolverState* state);
  void RestoreState(const SolverState& state, const std::string& origin);
  // The stage before the rule (K-FAC's), or null. The optimizer owns it.
  GradientStage<Dtype>* stage() const { return stage_.get(); }
  void set_stage(std::unique_ptr<GradientStage<Dtype>> stage) { stage_ = std::move(stage); }

 protected:
  virtual const char* rule_type() const = 0;
  // Turns the (normalised, regularised) gradient of learnable param `param_id` into the step in its diff.
  // `iter` is the iteration the gradient belongs to (Adam's bias correction uses it).
  virtual void ComputeUpdateValue(int param_id, Dtype rate, int iter) = 0;
  virtual bool rule_has_one_pass() const { return false; }
  // The rule's half of UpdateSlice (rules with rule_has_one_pass() override it).
  virtual void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter, const OnePassStep& step) {}
  // Rules with a second history blob per param (AdaDelta, Adam) append it after the first ones.
  void AddSecondHistory();

  // The gradient times gradient_scale() (nothing when that is 1).
  void Normalize(int param_id);
  void Regularize(int param_id);
  // Scales the gradients down so that the L2 norm of diff_scale x diff (over every part of the model) is at most
  // clip_gradients.
  void ClipGradients(Dtype diff_scale);
  // Whether every learnable param's gradient is finite, in every part of the model (a dynamic loss scale skips the
  // step when one is not).
  bool GradientsFinite() const;
  // The net's loss scale and gradient_scale() from the scaler's scale.
  void UseLossScale();

  SolverParameter param_;
  Net<Dtype>* net_;
  std::vector<std::shared_ptr<Blob<Dtype>>> history_;

 private:
  void UpdateParam(int param_id, Dtype rate, int iter);
  // The separate passes after the mean: layouts aligned, regularised, the rule, data -= step.
  void StepParam(int param_id, Dtype rate, int iter);
  // The stage's path: the mean, clipping, the stage, then regularisation and the rule in separate passes.
  void ApplyWithStage(Dtype rate, int iter);

  std::unique_ptr<GradientStage<Dtype>> stage_;
  Collectives* model_parts_ = nullptr;
  LossScaler loss_scaler_;
  int replicas_ = 1;
  Dtype gradient_scale_ = 1;
  bool gradients_zeroed_ = false;
  int skipped_iterations_ = 0;
};

// The optimizers by solver type: "SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam", "KFAC" (the
// legacy solver_type enum maps to these names).
template <typename Dtype>
class OptimizerRegistry {
 public:
  using Creator = std::function<std::unique_ptr<Optimizer<Dtype>>(const SolverParameter&, Net<Dtype>*)>;
  static void Add(const std::string& type, Creator c);
  // The type `param` names (its type, or the legacy enum); an unknown one is an Error naming the known ones.
  static std::string TypeOf(const SolverParameter& param);
  static std::unique_ptr<Optimizer<Dtype>> Create(const SolverParameter& param, Net<Dtype>* net);
  static std::vector<std::string> Types();

 private:
  static std::map<std::string, Creator>& registry();
};

template <typename Dtype>
struct OptimizerRegisterer {
  OptimizerRegisterer(const std::string& type, typename OptimizerRegistry<Dtype>::Creator c) {
    OptimizerRegistry<Dtype>::Add(type, std::move(c));
  }
};

#define REGISTER_OPTIMIZER_CLASS(type)                                                                    \
  static ::strata::OptimizerRegisterer<float> g_strata_optimizer_f_##type(                               \
      #type, [](const ::strata::SolverParameter& p, ::strata::Net<float>* n) {                           \
        return std::make_unique<type##Optimizer<float>>(p, n);                                            \
      });                                                                                                 \
  static ::strata::OptimizerRegisterer<double> g_strata_optimizer_d_##type(                              \
      #type, [](const ::strata::SolverParameter& p, ::strata::Net<double>* n) {                          \
        return std::make_unique<type##Optimizer<double>>(p, n);                                           \
      })

}  // namespace strata
