// Solver: the training loop around a Net (Caffe's semantics and log format), with the update split per
// layer so that data-parallel training can update a layer as soon as its gradient is reduced.
//
// One iteration:  ClearParamDiffs -> iter_size x (Forward + Backward) -> for each layer, update_layer(i)
// update_layer(i), for the learnable params whose gradient is final after layer i's backward:
//   normalise (1/iter_size) -> regularise (L2/L1 weight decay x decay_mult) -> ComputeUpdateValue (the
//   solver type: SGD momentum, Nesterov, Adam...) -> data -= diff.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/net.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

// What a solver that communicates more than the gradient needs from the ranks of a data-parallel job (K-FAC: its
// factors and preconditioned gradients). GradientSync provides it over MPI (strata/comm/mpi_collectives.hpp); a
// single rank has none. Called from the solver's thread, collectively: every rank makes the same calls.
class SolverCollectives {
 public:
  virtual ~SolverCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums buf over the ranks, in place; every rank ends with identical values.
  virtual void Allreduce(float* buf, size_t n) = 0;
  virtual void Allreduce(double* buf, size_t n) = 0;
  // buf holds one block per rank in rank order, counts[r] values for rank r. Afterwards this rank's block holds
  // that block summed over the ranks; the other blocks are left as they were.
  virtual void ReduceScatter(float* buf, const std::vector<int>& counts) = 0;
  virtual void ReduceScatter(double* buf, const std::vector<int>& counts) = 0;
  // buf holds this rank's block at its place (the same layout); afterwards every rank holds every block.
  virtual void Allgather(float* buf, const std::vector<int>& counts) = 0;
  virtual void Allgather(double* buf, const std::vector<int>& counts) = 0;
};

// What the solver does when a signal arrives (Caffe's --sigint_effect / --sighup_effect).
enum class SignalAction { kNone, kStop, kSnapshot };
SignalAction ParseSignalAction(const std::string& name);

template <typename Dtype>
class Solver {
 public:
  explicit Solver(const SolverParameter& param);
  virtual ~Solver() = default;
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
  // What a one-pass update does before the solver's rule: g <- grad_scale * g + weight decay.
  struct FusedStep {
    Dtype grad_scale;
    Dtype decay;  // weight_decay x the param's decay_mult
    bool l1;      // regularization_type "L1": decay x sign(w), else decay x w
  };
  // The one-pass update on the CPU: for elements [begin, end) of learnable param `param_id`, the gradient is
  // scaled by `grad_scale` (1 / iter_size, times 1 / ranks in data-parallel training) and regularised, the
  // solver's rule advances its history and moves the weights, and the gradient is left at zero, all in one
  // sweep over memory (normalise, regularise, ComputeUpdateValue and Blob::Update would take five).
  // The data-parallel engine runs it on each chunk right after the chunk's allreduce, while the chunk is
  // still in cache. Only for solvers with has_fused_update(); safe to call concurrently on disjoint ranges.
  void UpdateSlice(int param_id, size_t begin, size_t end, Dtype rate, int iter, Dtype grad_scale);
  // Makes the CPU copies of the history and of the params' values and gradients exist now. SyncedMemory
  // allocates lazily and is not thread-safe, so threads that call UpdateSlice on slices of one param must
  // not be the first to touch it (two would each allocate a history, and one's updates would be lost).
  void AllocateUpdateState();
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
  // The ranks of a data-parallel job, for solvers that communicate (set by the data-parallel engine).
  void set_collectives(std::shared_ptr<SolverCollectives> c) { collectives_ = std::move(c); }
  // The learning rate at the current iteration (advances the step counter of step/multistep policies).
  Dtype GetLearningRate();

  void Snapshot();
  // Restores iteration, history, lr step, data positions, RNG and (if recorded) the weights.
  void Restore(const std::string& state_file);

  const SolverParameter& param() const { return param_; }
  Net<Dtype>* net() { return net_.get(); }
  const std::vector<std::shared_ptr<Net<Dtype>>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  virtual const char* type() const = 0;

  // Signal handling: polled once per iteration.
  void SetActionFunction(std::function<SignalAction()> f) { action_ = std::move(f); }
  // Turns this rank's polled action into the one every rank takes at this iteration (the data-parallel
  // engine: a signal that reaches ranks at different iterations must still stop or snapshot all of them at
  // the same one). Called once per iteration, right after the action function.
  void set_action_agreement(std::function<SignalAction(SignalAction)> f) { action_agreement_ = std::move(f); }
  // Called after each iteration's update (data-parallel consistency checks, timing).
  void add_iteration_callback(std::function<void(int iter)> cb) { iteration_callbacks_.push_back(std::move(cb)); }

  // Replaces how one iteration's gradients are computed and applied (default: clear the gradients,
  // forward/backward, ApplyUpdate). The data-parallel engine installs its overlapped version here; it then
  // owns clearing the gradients, since updates of iteration t may still run while iteration t+1 starts.
  using IterationFn = std::function<Dtype()>;
  void set_iteration_function(IterationFn f) { iteration_fn_ = std::move(f); }
  // The default iteration: iter_size x ForwardBackward, then ApplyUpdate. Returns the mean loss.
  Dtype DefaultIteration();
  // Called before anything reads the weights outside the training step (test, snapshot, end of Solve):
  // the data-parallel engine finishes its pending updates here.
  void set_drain_function(std::function<void()> f) { drain_fn_ = std::move(f); }
  // Combines test scores across ranks (the data-parallel engine averages them); default: as they are.
  void set_score_reducer(std::function<void(std::vector<Dtype>*)> f) { score_reducer_ = std::move(f); }
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

  void Normalize(int param_id);
  void Regularize(int param_id);
  void ClipGradients();

  SolverParameter param_;
  int iter_ = 0;
  int current_step_ = 0;
  std::shared_ptr<Net<Dtype>> net_;
  std::vector<std::shared_ptr<Net<Dtype>>> test_nets_;
  // One history blob per learnable param (Adam keeps a second set after the first).
  std::vector<std::shared_ptr<Blob<Dtype>>> history_;
  Dtype rate_ = 0;  // the learning rate of the current iteration
  bool statistics_pass_ = false;
  std::shared_ptr<SolverCollectives> collectives_;  // null: one rank

 private:
  void InitTrainNet();
  void InitTestNets();
  std::vector<Dtype> Test(int test_net_id);
  void UpdateSmoothedLoss(Dtype loss, int start_iter, int average_loss);
  void DisplayOutputs(const std::vector<Blob<Dtype>*>& outputs, const Net<Dtype>& net, const char* which);
  void UpdateParam(int param_id, Dtype rate, int iter);
  std::vector<uint64_t> DataPositions();
  void SetDataPositions(const std::vector<uint64_t>& positions);

  std::vector<Dtype> losses_;
  Dtype smoothed_loss_ = 0;
  std::function<SignalAction()> action_;
  std::function<SignalAction(SignalAction)> action_agreement_;
  std::vector<std::function<void(int)>> iteration_callbacks_;
  IterationFn iteration_fn_;
  std::function<void()> drain_fn_;
  std::function<void(std::vector<Dtype>*)> score_reducer_;
  bool requested_early_exit_ = false;
  // The last ApplyUpdate left every gradient at zero (one-pass updates), so the next iteration need not clear.
  bool diffs_clear_ = false;
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

}  // namespace strata
