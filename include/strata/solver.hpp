// Solver: the training loop around a Net (Caffe's semantics and log format). How one iteration's gradients are
// computed, reduced and applied belongs to the solver's TrainingEngine (strata/engine/training_engine.hpp): a
// LocalEngine unless a data-parallel (or other) engine is installed. The solver keeps the loop, the learning
// rate, tests, snapshots, signals and logs, and the update rule, split per layer so that an engine can update a
// layer as soon as its gradient is reduced.
//
// update_layer(i), for the learnable params whose gradient is final after layer i's backward:
//   scale (gradient_scale(): 1 / (replicas x iter_size)) -> regularise (L2/L1 weight decay x decay_mult) ->
//   ComputeUpdateValue (the solver type: SGD momentum, Nesterov, Adam...) -> data -= diff.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/comm/collectives.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/net.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

template <typename Dtype>
class Solver {
 public:
  explicit Solver(const SolverParameter& param);
  virtual ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // Trains to max_iter (resuming from `resume_file` if given), snapshots at the end, runs the final test.
  void Solve(const std::string& resume_file = "");
  // Runs `iters` iterations.
  void Step(int iters);
  // Tests every test net and logs their outputs; returns each test net's averaged outputs.
  std::vector<std::vector<Dtype>> TestAll();

  // Updates the learnable params whose gradients are final after layer `layer_id`'s backward, with the
  // learning rate and iteration number of the current iteration.
  void update_layer(int layer_id) { update_layer(layer_id, rate_, iter_); }
  // The same with an explicit rate and iteration: the overlapped engine may still be updating iteration t
  // while the loop has moved on to t+1. Safe to call concurrently for different layers.
  void update_layer(int layer_id, Dtype rate, int iter);
  // The learning rate of the iteration in progress (set by Step before each iteration).
  Dtype current_rate() const { return rate_; }
  // Updates all layers (what one rank does after backward; the overlapped engine calls update_layer itself).
  virtual void ApplyUpdate();
  // Whether the last ApplyUpdate left every gradient at zero (one-pass updates): the next iteration need not
  // clear them.
  bool gradients_zeroed() const { return gradients_zeroed_; }
  // What a one-pass update does before the solver's rule: g <- grad_scale * g + weight decay.
  struct FusedStep {
    Dtype grad_scale;
    Dtype decay;  // weight_decay x the param's decay_mult
    bool l1;      // regularization_type "L1": decay x sign(w), else decay x w
  };
  // The one-pass update on the CPU: for elements [begin, end) of learnable param `param_id`, the gradient is
  // scaled by `grad_scale` (gradient_scale() in training) and regularised, the solver's rule advances its
  // history and moves the weights, and the gradient is left at zero, all in one sweep over memory (normalise,
  // regularise, ComputeUpdateValue and Blob::Update would take five). The data-parallel engine runs it on each
  // chunk right after the chunk's allreduce, while the chunk is still in cache. Only for solvers with
  // has_fused_update(); safe to call concurrently on disjoint ranges.
  void UpdateSlice(int param_id, size_t begin, size_t end, Dtype rate, int iter, Dtype grad_scale);
  // Makes the CPU copies of the history and of the params' values and gradients exist now. SyncedMemory
  // allocates lazily and is not thread-safe, so threads that call UpdateSlice on slices of one param must
  // not be the first to touch it (two would each allocate a history, and one's updates would be lost).
  void AllocateUpdateState();
  // Brings param `param_id`'s gradient and history into the layout its value is in (a layer may keep its weights
  // in oneDNN's order, strata/layout.hpp's CustomLayout), so that the update's elementwise sweeps read all of them
  // alike. The update paths call it; the data-parallel engine calls it on its main thread before threads update
  // slices of the param (a conversion is not thread-safe, and is then already done).
  void AlignLayouts(int param_id);
  // Whether this solver has a one-pass CPU rule (the SGD family; a custom solver that only defines
  // ComputeUpdateValue does not, and is updated in separate passes).
  virtual bool has_fused_update() const { return false; }
  // Whether UpdateParam takes the one-pass path now: a one-pass rule, and the weights on the CPU.
  bool updates_in_one_pass() const { return has_fused_update() && Strata::mode() == Strata::CPU; }
  // Whether the update needs the whole reduced gradient at once (gradient clipping; K-FAC's trust region):
  // then the data-parallel engine reduces every layer and calls ApplyUpdate, never update_layer.
  virtual bool needs_whole_gradient() const { return param_.clip_gradients() >= 0; }
  // Called between the forward and the backward of every pass of an iteration (K-FAC's true-Fisher pass).
  virtual void BeforeBackward(int pass) {}
  // True while the solver runs a backward of its own, for statistics: its gradients are not the iteration's,
  // so hooks that ship gradients must leave them alone.
  bool in_statistics_pass() const { return statistics_pass_; }

  // The engine: how iterations are run (LocalEngine until another is installed). Installing one (null: back to
  // a LocalEngine) also fixes gradient_scale(). Returns the engine installed. An engine with threads of its own
  // (DataParallelEngine) may still be updating the weights after an error escapes Solve or Step: install null
  // (which stops them) before destroying the solver then, since a derived solver's destructor runs before this
  // class's destroys the engine.
  TrainingEngine<Dtype>* set_engine(std::unique_ptr<TrainingEngine<Dtype>> engine);
  TrainingEngine<Dtype>* engine() { return engine_.get(); }
  // What every reduced gradient is multiplied by before regularisation and the rule: engines sum the gradients
  // of replicas() replicas, each summed over iter_size passes, so the mean is 1 / (replicas x iter_size). The one
  // place this is computed; the engine's reductions, staging and NCCL return sums.
  Dtype gradient_scale() const { return gradient_scale_; }
  // The learning rate at the current iteration (advances the step counter of step/multistep policies).
  Dtype GetLearningRate();

  void Snapshot();
  // Restores iteration, history, lr step, the data layers' positions and transform seeds, this rank's random
  // engine and (if recorded) the weights: the resumed run then repeats the uninterrupted one bit for bit.
  // A solverstate from before those were recorded still loads, with a warning that resume is not exact.
  void Restore(const std::string& state_file);
  // The same from a parsed state; `origin` (the file) prefixes error messages and locates a moved
  // learned_net beside it. Errors leave the solver partly restored: callers give up on it.
  void Restore(const SolverState& state, const std::string& origin);

  const SolverParameter& param() const { return param_; }
  Net<Dtype>* net() { return net_.get(); }
  const std::vector<std::shared_ptr<Net<Dtype>>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  // The loss as the log prints it: the mean of the last average_loss iterations' losses.
  Dtype smoothed_loss() const { return smoothed_loss_; }
  virtual const char* type() const = 0;

  // Signal handling: polled once per iteration.
  void SetActionFunction(std::function<SignalAction()> f) { action_ = std::move(f); }
  // Polled by a one-process engine between an iteration's micro-batches (iter_size may be huge): true when a
  // signal asks to stop now. The engine then drops the iteration, and Solve ends without a final snapshot.
  bool StopRequestedInIteration();
  // Throws the Error for a non-finite loss at the current iteration.
  void CheckLoss(Dtype loss) const;

  // Paths a snapshot at the current iteration would use.
  std::string SnapshotFilename(const std::string& extension) const;

 protected:
  // Turns the (normalised, regularised) gradient of learnable param `param_id` into the step in its diff.
  // `iter` is the iteration the gradient belongs to (Adam's bias correction uses it).
  virtual void ComputeUpdateValue(int param_id, Dtype rate, int iter) = 0;
  // The solver's half of UpdateSlice (has_fused_update() solvers override it).
  virtual void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter, const FusedStep& step) {}
  // Solver-type state, stored in the solverstate's history blobs.
  std::vector<std::shared_ptr<Blob<Dtype>>>& history() { return history_; }
  virtual void PreSolve() {}

  // The gradient times gradient_scale() (nothing when that is 1).
  void Normalize(int param_id);
  void Regularize(int param_id);
  // Scales the gradients down so that the L2 norm of diff_scale x diff is at most clip_gradients.
  void ClipGradients(Dtype diff_scale);
  // The replicas' collectives, from the engine (null: one rank).
  Collectives* collectives() const { return engine_->collectives(); }

  SolverParameter param_;
  int iter_ = 0;
  int current_step_ = 0;
  std::shared_ptr<Net<Dtype>> net_;
  std::vector<std::shared_ptr<Net<Dtype>>> test_nets_;
  // One history blob per learnable param (Adam keeps a second set after the first).
  std::vector<std::shared_ptr<Blob<Dtype>>> history_;
  Dtype rate_ = 0;  // the learning rate of the current iteration
  bool statistics_pass_ = false;
  bool gradients_zeroed_ = false;

 private:
  void InitTrainNet();
  void InitTestNets();
  std::vector<Dtype> Test(int test_net_id);
  void UpdateSmoothedLoss(Dtype loss, int start_iter, int average_loss);
  void DisplayOutputs(const std::vector<Blob<Dtype>*>& outputs, const Net<Dtype>& net, const char* which);
  void UpdateParam(int param_id, Dtype rate, int iter);
  // The data layers whose streams a solverstate keeps: the train net's, then each test net's, in net order.
  std::vector<Layer<Dtype>*> RecordStreamLayers();
  void RestoreRecordStreams(const SolverState& state, const std::string& state_file);
  void RestoreRandomEngine(const SolverState& state, const std::string& state_file);
  // Deletes the temporary files of snapshots that a killed process never finished.
  void RemoveStaleSnapshotFiles() const;

  std::vector<Dtype> losses_;
  Dtype smoothed_loss_ = 0;
  std::function<SignalAction()> action_;
  SignalAction pending_action_ = SignalAction::kNone;  // polled inside an iteration, acted on after it
  bool iteration_dropped_ = false;
  bool requested_early_exit_ = false;
  Dtype gradient_scale_ = 1;
  std::unique_ptr<TrainingEngine<Dtype>> engine_;
};

// The solver registry: "SGD", "Nesterov", "Adam", ... (the legacy solver_type enum maps to these names).
template <typename Dtype>
class SolverRegistry {
 public:
  using Creator = std::function<std::unique_ptr<Solver<Dtype>>(const SolverParameter&)>;
  static void Add(const std::string& type, Creator c);
  static std::unique_ptr<Solver<Dtype>> Create(const SolverParameter& param);
  static std::vector<std::string> Types();

 private:
  static std::map<std::string, Creator>& registry();
};

template <typename Dtype>
struct SolverRegisterer {
  SolverRegisterer(const std::string& type, typename SolverRegistry<Dtype>::Creator c) {
    SolverRegistry<Dtype>::Add(type, std::move(c));
  }
};

#define REGISTER_SOLVER_CLASS(type)                                                                       \
  static ::strata::SolverRegisterer<float> g_strata_solver_f_##type(                                     \
      #type, [](const ::strata::SolverParameter& p) { return std::make_unique<type##Solver<float>>(p); }); \
  static ::strata::SolverRegisterer<double> g_strata_solver_d_##type(                                    \
      #type, [](const ::strata::SolverParameter& p) { return std::make_unique<type##Solver<double>>(p); })

// Reads a solver prototxt and checks it (a net is given, numbers in range), resolving nothing else.
SolverParameter ReadSolverParam(const std::string& filename);
// The learning rate policy on its own, for tests and tools: rate at `iter` (multistep uses `current_step`,
// which it advances).
float LearningRateAt(const SolverParameter& param, int iter, int* current_step);
// The solver's train net (net, net_param, train_net or train_net_param) with its state: TRAIN plus train_state.
NetParameter TrainNetParam(const SolverParameter& param);
// The solver's test nets, one per test_iter entry, each with its state: TEST plus its test_state. Checks the
// counts and that every test_iter is positive.
std::vector<NetParameter> TestNetParams(const SolverParameter& param);

}  // namespace strata
