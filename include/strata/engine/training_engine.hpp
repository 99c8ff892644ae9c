// TrainingEngine: how one training iteration's gradients are computed, reduced and applied: it takes the train Net
// and the Optimizer (the update rule, strata/optimizer.hpp), never the loop. The loop (Solver) owns one, chosen by
// MakeEngine (strata/engine/make_engine.hpp), and keeps everything around it: the learning rate, tests,
// snapshots, signals and logs.
//
//   Solver::Step, per iteration:
//     action = engine.AgreeOnAction(polled signal, iter)    every rank stops or snapshots at the same iteration
//     loss   = engine.Iterate(rate, iter)                   forward, backward, reduce, optimizer update
//     engine.AfterIteration(iter + 1)                       checks and statistics of the engine
//   before a test or snapshot reads the weights: engine.Drain()
//   test scores: engine.ReduceScores(&scores)              the mean over the ranks
//   end of Solve: engine.Finish(iter)
//
// Engines:
//   LocalEngine (this file)                   one process, read top to bottom in training_engine.cpp
//   DataParallelEngine (data_parallel_engine.hpp)   N ranks, each layer's gradient reduced during backward
//   PipelineEngine (pipeline_engine.hpp)       the net cut by depth into stages across ranks, x replicas
//
// The rate and iteration reach the optimizer by one channel: Iterate's arguments. Gradient scaling has one owner:
// engines sum gradients over their replicas() and never divide; the optimizer scales every gradient by
// Optimizer::gradient_scale() = 1 / (replicas x iter_size) as part of its update.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace strata {

class Collectives;
class NetParameter;
template <typename Dtype>
class Blob;
template <typename Dtype>
class Layer;
template <typename Dtype>
class Net;
template <typename Dtype>
class Optimizer;

// Throws the Error for a non-finite loss at iteration `iter`: training stops before the update is applied.
void RequireFiniteLoss(double loss, int iter);

// What the solver does when a signal arrives (Caffe's --sigint_effect / --sighup_effect).
enum class SignalAction { kNone, kStop, kSnapshot };
SignalAction ParseSignalAction(const std::string& name);

template <typename Dtype>
class TrainingEngine {
 public:
  virtual ~TrainingEngine() = default;

  // Runs iteration `iter` at learning rate `rate`: computes the gradients (iter_size passes), reduces them over
  // the replicas and applies the optimizer's update with this rate and iteration (possibly still in flight when this returns; the next forward
  // of each layer waits for its own update). Returns the loss averaged over the passes (this rank's).
  virtual Dtype Iterate(Dtype rate, int iter) = 0;
  // Finishes every pending update and makes the weights whole and equal on every replica: called before
  // anything reads the weights outside the step (test, snapshot, end of training).
  virtual void Drain() {}
  // Turns this rank's polled request at iteration `iter` into the action every rank takes now.
  virtual SignalAction AgreeOnAction(SignalAction local, int iter) { return local; }
  // Test scores computed by each rank on its own: afterwards the mean over the ranks.
  virtual void ReduceScores(std::vector<Dtype>* scores) {}
  // After an iteration's update was started; `iterations_done` is the loop's new iteration count.
  virtual void AfterIteration(int iterations_done) {}
  // The end of training, after the last Drain (consistency checks, the timeline). Collective.
  virtual void Finish(int iterations_done) {}

  // One forward of test net `net` (one batch): the blobs whose values are its scores, and the loss in *loss. A
  // pipeline runs it stage by stage; there, ranks without the last stage return no blobs.
  virtual const std::vector<Blob<Dtype>*>& TestForward(Net<Dtype>& net, Dtype* loss);
  // One forward of the train net `net` outside an iteration (the loss Solve prints at the end, as Caffe does); a
  // pipeline runs one micro-batch through its stages, and only the last stage's loss is not 0.
  virtual void TrainForward(Net<Dtype>& net, Dtype* loss);
  // The weights a snapshot writes, whole on the rank that writes (rank 0). Collective. false: the solver's own
  // net holds them all (every engine but the pipeline's).
  virtual bool GatherWeights(NetParameter* weights, bool write_diff) { return false; }

  // Where a net cut by depth lives: the stage each rank holds (world rank order), for the state a snapshot gathers
  // from the stages and a restore gives back to them (Solver::Snapshot, Solver::Restore). Empty: every rank holds
  // the whole net (every engine but the pipeline's).
  virtual std::vector<int> stage_of_ranks() const { return {}; }
  // Layers outside the solver's nets whose record streams (data positions) a snapshot keeps: a pipeline's first
  // stage reads its training data in a net of its own.
  virtual std::vector<Layer<Dtype>*> record_stream_layers() { return {}; }

  // How many gradient contributions each reduced gradient sums (the ranks of a data-parallel job).
  virtual int replicas() const { return 1; }
  // Collectives over every rank of the job (the loop's: snapshots gather by them); null: one rank.
  virtual Collectives* collectives() { return nullptr; }
  // Collectives over the ranks holding copies of this rank's part of the model, for optimizers that communicate
  // more than the gradient (K-FAC): every rank but in a pipeline, where a stage's replicas; null: none.
  virtual Collectives* replica_collectives() { return collectives(); }
  // Collectives over the ranks that hold the other parts of this rank's model (a pipeline replica's stages); null:
  // every rank holds the whole model. Optimizer::set_model_parts says what they are for.
  virtual Collectives* model_parts() { return nullptr; }

  // The loop's "stop now?", for engines that drop an iteration between its micro-batches: a signal is then
  // honoured within one micro-batch whatever iter_size is (a data-parallel job's ranks agree on it first).
  void set_stop_poll(std::function<bool()> poll) { stop_poll_ = std::move(poll); }
  // Whether the last Iterate stopped between micro-batches, and so applied no update.
  bool iteration_dropped() const { return iteration_dropped_; }

 protected:
  bool StopRequested() const { return stop_poll_ && stop_poll_(); }

  bool iteration_dropped_ = false;  // set by Iterate

 private:
  std::function<bool()> stop_poll_;
};

// One process: clear the gradients, iter_size x (forward, backward), then the optimizer's Apply.
template <typename Dtype>
class LocalEngine : public TrainingEngine<Dtype> {
 public:
  LocalEngine(Net<Dtype>* net, Optimizer<Dtype>* optimizer, int iter_size)
      : net_(net), optimizer_(optimizer), iter_size_(iter_size) {}
  Dtype Iterate(Dtype rate, int iter) override;

 private:
  Net<Dtype>* net_;
  Optimizer<Dtype>* optimizer_;
  int iter_size_;
};

}  // namespace strata
