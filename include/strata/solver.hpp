// Solver: the training loop around a Net (Caffe's semantics and log format). It owns the nets, the Optimizer (the
// update rule and its state, strata/optimizer.hpp) and the TrainingEngine (how one iteration's gradients are
// computed, reduced and applied, strata/engine/training_engine.hpp; MakeEngine picks it), and keeps what is around
// an iteration: the learning rate, tests, snapshots, signals and logs. Step reads top to bottom:
//
//   test when test_interval says            TestAll: engine.Drain(), each test net's forward, engine.ReduceScores
//   act on a signal every rank agrees on    engine.AgreeOnAction: snapshot or stop
//   rate = the lr policy at iter            GetLearningRate
//   loss = engine.Iterate(rate, iter)       forward, backward, reduce, optimizer update
//   log; ++iter; engine.AfterIteration      snapshot when `snapshot` says
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/engine/make_engine.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/net.hpp"
#include "strata/optimizer.hpp"
#include "strata/proto/strata.pb.h"
#include "strata/solver_param.hpp"

namespace strata {

template <typename Dtype>
class Solver {
 public:
  // Builds the train and test nets (a pipeline stage's cut of them when `setup` runs a pipeline), the optimizer
  // that param.type names and the engine that MakeEngine chooses for `setup` (one process: a LocalEngine).
  // Settings that cannot go together are refused here, before any iteration.
  explicit Solver(const SolverParameter& param, const EngineSetup& setup = EngineSetup());
  virtual ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // Trains to max_iter (resuming from `resume_file` if given), snapshots at the end, runs the final test.
  void Solve(const std::string& resume_file = "");
  // Runs `iters` iterations.
  void Step(int iters);
  // Tests every test net and logs their outputs; returns each test net's averaged outputs.
  std::vector<std::vector<Dtype>> TestAll();

  // The engine: how iterations are run. Installing another (null: a LocalEngine) tells the optimizer the
  // engine's replicas (its gradient scale) and collectives. Returns the engine installed. An engine with threads
  // of its own (DataParallelEngine) may still be updating the weights after an error escapes Solve or Step:
  // install null (which stops them) before destroying the solver then.
  TrainingEngine<Dtype>* set_engine(std::unique_ptr<TrainingEngine<Dtype>> engine);
  TrainingEngine<Dtype>* engine() { return engine_.get(); }
  Optimizer<Dtype>* optimizer() { return optimizer_.get(); }
  // The learning rate at the current iteration (advances the step counter of step/multistep policies).
  Dtype GetLearningRate();

  void Snapshot();
  // Restores iteration, history, lr step, the data layers' positions and transform seeds, this rank's random
  // engine and (if recorded) the weights: the resumed run then repeats the uninterrupted one bit for bit.
  // A solverstate from before those were recorded still loads, with a warning that resume is not exact.
  void Restore(const std::string& state_file);
  // The same from a parsed state; `origin` (the file) prefixes error messages, and the caffemodel written with the
  // state is found beside it (ReadPairedCaffemodel). Errors leave the solver partly restored: callers give up on it.
  void Restore(const SolverState& state, const std::string& origin);

  const SolverParameter& param() const { return param_; }
  Net<Dtype>* net() { return net_.get(); }
  const std::vector<std::shared_ptr<Net<Dtype>>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  // The loss as the log prints it: the mean of the last average_loss iterations' losses.
  Dtype smoothed_loss() const { return smoothed_loss_; }
  // The solver type ("SGD", "Adam", "KFAC", ...): its optimizer's.
  const char* type() const { return optimizer_->type(); }

  // Signal handling: polled once per iteration.
  void SetActionFunction(std::function<SignalAction()> f) { action_ = std::move(f); }

  // Paths a snapshot at the current iteration would use.
  std::string SnapshotFilename(const std::string& extension) const;

 protected:
  SolverParameter param_;
  int iter_ = 0;
  int current_step_ = 0;
  std::shared_ptr<Net<Dtype>> net_;
  std::vector<std::shared_ptr<Net<Dtype>>> test_nets_;

 private:
  void InitTrainNet(const DataShard& shard);
  void InitTestNets(const DataShard& shard);
  std::vector<Dtype> Test(int test_net_id);
  void UpdateSmoothedLoss(Dtype loss, int start_iter, int average_loss);
  void DisplayOutputs(const std::vector<Blob<Dtype>*>& outputs, const Net<Dtype>& net, const char* which);
  // The data layers whose streams a solverstate keeps: the engine's own (a pipeline's first stage), the train
  // net's, then each test net's, in net order.
  std::vector<Layer<Dtype>*> RecordStreamLayers();
  // The state a net cut by depth spreads over its stages: the optimizer's history and the data layers' streams.
  void SaveSpreadState(SolverState* state);
  // A pipeline's: each stage's (from one replica), its optimizer stage's blocks too, gathered to rank 0 in the whole
  // net's order (collective), and this rank's stage's part of a whole state on restore (collective).
  void GatherSpreadState(const std::vector<int>& stage_of, SolverState* state);
  void StagePartOf(const SolverState& whole, const std::vector<int>& stage_of, const std::string& origin,
                   SolverState* part);
  void RestoreRecordStreams(const SolverState& state, const std::string& state_file);
  void RestoreRandomEngine(const SolverState& state, const std::string& state_file);
  // The replicas' collectives, from the engine (null: one rank).
  Collectives* collectives() const { return engine_->collectives(); }
  // Asked by the engine between an iteration's micro-batches (iter_size may be huge): true when a signal reached
  // this process asking to stop. The engine then drops the iteration (a data-parallel job's ranks agree on that
  // first), and Solve ends without a final snapshot.
  bool StopRequestedInIteration();

  std::vector<Dtype> losses_;
  Dtype smoothed_loss_ = 0;
  std::function<SignalAction()> action_;
  SignalAction pending_action_ = SignalAction::kNone;  // polled inside an iteration, acted on after it
  bool requested_early_exit_ = false;
  // Declared after the nets, so destroyed before them (the optimizer's stage holds hooks on the train net); the
  // engine last declared, so destroyed first: its threads may still be updating the weights.
  std::unique_ptr<Optimizer<Dtype>> optimizer_;
  std::unique_ptr<TrainingEngine<Dtype>> engine_;
};

// Loads the caffemodels `files` into `net`, in order (the solver's `weights` field, as Caffe's Solver loads it;
// `strata train --weights`; `strata test --weights`). A file that sets no layer of the net is an error
// (Net::CopyTrainedLayersFrom); layers with parameters that no file sets keep their values, with a warning naming
// them (fine-tuning a changed net), or an error where `strict`. `origin` names where the files came from.
template <typename Dtype>
void LoadWeights(Net<Dtype>* net, const std::vector<std::string>& files, const std::string& origin, bool strict);

// The loop for the solver type `param` names ("SGD", "Nesterov", "Adam", ..., "KFAC"; the legacy solver_type enum
// maps to these names): one Solver class, with the optimizer of that type (OptimizerRegistry).
template <typename Dtype>
class SolverRegistry {
 public:
  static std::unique_ptr<Solver<Dtype>> Create(const SolverParameter& param, const EngineSetup& setup = EngineSetup()) {
    return std::make_unique<Solver<Dtype>>(param, setup);
  }
  static std::vector<std::string> Types() { return OptimizerRegistry<Dtype>::Types(); }
};

// The loop by solver type, as Caffe (and pycaffe: caffe.SGDSolver(file), ...) names it: a Solver whose optimizer
// is that type's, whatever type the parameter names.
// `param` with its solver type set to `type`.
inline SolverParameter WithSolverType(SolverParameter param, const char* type) {
  param.clear_solver_type();
  param.set_type(type);
  return param;
}

#define STRATA_TYPED_SOLVER(Name, type_name)                                                   \
  template <typename Dtype>                                                                   \
  class Name : public Solver<Dtype> {                                                         \
   public:                                                                                    \
    explicit Name(const SolverParameter& param, const EngineSetup& setup = EngineSetup())     \
        : Solver<Dtype>(WithSolverType(param, type_name), setup) {}                           \
  }

STRATA_TYPED_SOLVER(SGDSolver, "SGD");
STRATA_TYPED_SOLVER(NesterovSolver, "Nesterov");
STRATA_TYPED_SOLVER(AdaGradSolver, "AdaGrad");
STRATA_TYPED_SOLVER(RMSPropSolver, "RMSProp");
STRATA_TYPED_SOLVER(AdaDeltaSolver, "AdaDelta");
STRATA_TYPED_SOLVER(AdamSolver, "Adam");
STRATA_TYPED_SOLVER(KfacSolver, "KFAC");

#undef STRATA_TYPED_SOLVER

}  // namespace strata
