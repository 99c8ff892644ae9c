// PipelineEngine: the net cut by depth into stages, one per rank, micro-batches flowing forward from stage to stage
// and their gradients back (seed 003; GPipe, PETRA). docs/pipeline.md has the whole picture.
//
// One iteration (schedule SYNC), on the rank of stage s of S, with k = iter_size micro-batches:
//
//   fill:    min(S - s - 1, k) forwards             receive the micro-batch's inputs from stage s - 1 (stage 0: its
//                                                   source net reads the data), forward, send the outputs on
//   steady:  one forward, one backward, ...         backward: receive the output gradients (and, for a Reversible
//   drain:   the remaining backwards                stage, the outputs themselves) from stage s + 1, backward, send
//                                                   the input gradients (and inputs) to stage s - 1
//   update:  the gradients of the k micro-batches, summed over the replicas of the stage, then the optimizer's update
//
// The weights do not change within an iteration, so the result is gradient accumulation of the same k
// micro-batches on one rank (to float rounding), and a Reversible stage rebuilds its input exactly.
// Schedule ASYNC never drains: a stage keeps S - s - 1 forwards ahead across iterations, updates after each k of
// its backwards and runs each backward with the weights it has then (PETRA); Drain (before a test, a snapshot,
// the end) finishes the micro-batches in flight, whose gradients count towards the next update.
//
// What a stage keeps of a micro-batch between its forward and backward:
//   Reversible stage (Reversible blocks, possibly after a few ordinary layers, the stem): nothing but, with a stem,
//     the stage's input; backward rebuilds the blocks' inputs from the output that the next stage sends back with
//     the gradient, and runs the stem's forward again from the kept input.
//   STORE: everything: the stage has one copy of its net per micro-batch in flight (S - s of them, sharing weights
//     and gradients), as GPipe without recomputation.
//   RECOMPUTE: the stage's inputs; backward first runs the forward again (the random engine and the layers'
//     running statistics put back as they were), as GPipe.
//
// Boundary tensors travel as MPI point-to-point messages (StageLink, stage_link.hpp): sends are non-blocking, so a
// stage computes while its outputs leave. Ranks of one stage (its replicas) sum their
// gradients with the data-parallel engine's GradientReducer on communicators of their own, chunk by chunk as the
// iteration's last backward finishes each layer (the first layers' sums overlap the backward of the rest).
#pragma once

#include <mpi.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/mpi_collectives.hpp"
#include "strata/engine/data_parallel_engine.hpp"
#include "strata/engine/gradient_reducer.hpp"
#include "strata/engine/pipeline_plan.hpp"
#include "strata/engine/pipeline_stage_plan.hpp"
#include "strata/engine/pipeline_stats.hpp"
#include "strata/engine/stage_link.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/optimizer.hpp"

namespace strata {

template <typename Dtype>
class PipelineEngine : public TrainingEngine<Dtype> {
 public:
  // Runs this rank's stage net `net` and test nets `test_nets` (built from plan.param), updated by `optimizer`.
  // `source` (stage 0) is the net of its data layers, built already (it takes the data shard of its replica when
  // it is set up). `options` (comm_param) say how the stage's replicas sum their gradients; overlap, checksums and
  // the GPU path are the data-parallel engine's alone (the replicas stage GPU gradients through the host).
  PipelineEngine(Net<Dtype>* net, const std::vector<Net<Dtype>*>& test_nets, Optimizer<Dtype>* optimizer,
                 const Communicator& comm, const AllreducePolicy& policy, const PipelineStagePlan& plan,
                 std::unique_ptr<Net<Dtype>> source, const DataParallelOptions& options);
  ~PipelineEngine() override;
  PipelineEngine(const PipelineEngine&) = delete;
  PipelineEngine& operator=(const PipelineEngine&) = delete;

  Dtype Iterate(Dtype rate, int iter) override;
  void Drain() override;
  SignalAction AgreeOnAction(SignalAction local, int iter) override;
  void ReduceScores(std::vector<Dtype>* scores) override;
  const std::vector<Blob<Dtype>*>& TestForward(Net<Dtype>& net, Dtype* loss) override;
  void TrainForward(Net<Dtype>& net, Dtype* loss) override;
  bool GatherWeights(NetParameter* weights, bool write_diff) override;
  void AfterIteration(int iterations_done) override;
  void Finish(int iterations_done) override;
  std::vector<int> stage_of_ranks() const override;
  std::vector<Layer<Dtype>*> record_stream_layers() override;
  int replicas() const override { return grid_.replicas; }
  Collectives* collectives() override { return world_collectives_.get(); }
  Collectives* replica_collectives() override { return stage_collectives_.get(); }
  Collectives* model_parts() override { return parts_collectives_.get(); }

  const PipelineGrid& grid() const { return grid_; }
  // This stage keeps nothing of a micro-batch in flight (a Reversible stage).
  bool reversible() const { return reversible_; }
  // ... and without a stem: it keeps nothing at all. (ASYNC: every Reversible stage measures how far the first
  // block's rebuilt input is off, once per iteration.)
  bool rebuilds_input() const { return rebuilds_input_; }
  // Copies of the stage net (STORE: one per micro-batch in flight; otherwise 1).
  int net_copies() const { return static_cast<int>(nets_.size()); }
  const PipelineStats& stats() const { return stats_; }
  // Starts the figures again (after a warm-up), the peak memory too.
  void ResetStats();
  // Every stage's figures on rank 0 (GatherPipelineStats). Collective.
  std::vector<PipelineStats> GatherStats() const;

 private:
  // What the stage kept of a micro-batch in flight: its inputs (RECOMPUTE, or to send back to a Reversible
  // stage) and the random engine at its forward (RECOMPUTE).
  struct Kept {
    long mb = -1;
    std::vector<std::unique_ptr<Blob<Dtype>>> inputs;  // counted as activation memory
    std::mt19937 rng;
    std::vector<std::unique_ptr<Blob<Dtype>>> carried;  // the layers' carried state the forward started from
  };
  size_t CopyFor(long mb) const { return static_cast<size_t>(mb) % nets_.size(); }
  void Forward(long mb, Dtype* loss);
  void Backward(long mb);
  // Puts the inputs of `kept` back and runs the forward of layers 0..end again (RECOMPUTE: all; a Reversible stage:
  // its stem), leaving the running statistics and the random engine as they were.
  void Replay(Net<Dtype>& net, const Kept& kept, int end);
  // Hands the state the layers of `from` carry into their next forward (an LSTM's) to the same layers of `to`.
  static void HandOnCarriedState(Net<Dtype>& from, Net<Dtype>& to);
  // The schedules: one iteration's micro-batches. Return the summed loss of the forwards (last stage).
  Dtype RunSync();
  Dtype RunAsync();
  // Replicas: the gradients of each layer as the iteration's last backward finishes it, on the reducer's threads
  // (with MPI_THREAD_MULTIPLE; otherwise all of them after that backward, on this thread).
  void BeginLastBackward();
  void FinishReduction();
  Kept* KeptFor(long mb);
  // Keeps `inputs` (and the random engine) for micro-batch `mb`; with `net`, also the state its layers carry into
  // the forward about to run.
  static void Keep(Kept* kept, long mb, const std::vector<Blob<Dtype>*>& inputs, Net<Dtype>* net = nullptr);
  // ASYNC: the first block's rebuilt input against the forward's (after that block's backward).
  void MeasureReconstruction();
  double now_ms() const;

  Optimizer<Dtype>* optimizer_;
  std::vector<Net<Dtype>*> test_nets_;
  int display_;
  PipelineGrid grid_;
  PipelineParameter param_;
  StageCut cut_;
  std::vector<TestStage> tests_;
  bool reversible_ = false;
  bool rebuilds_input_ = false;   // Reversible without a stem: keeps nothing of a micro-batch in flight
  int stem_end_ = -1;             // Reversible with a stem: the stem's last layer in the stage net
  std::vector<Blob<Dtype>*> dropped_inputs_;  // Reversible without a stem: inputs freed after forward, rebuilt
  bool prev_reversible_ = false;  // the stage before rebuilds its input: send it our inputs with their gradient
  bool recompute_ = false;
  int k_ = 1;
  std::unique_ptr<Net<Dtype>> source_;                 // stage 0: the data layers
  std::vector<Net<Dtype>*> nets_;                      // [0] is the loop's
  std::vector<std::unique_ptr<Net<Dtype>>> copies_;   // the others (STORE)
  std::vector<std::string> inputs_, send_names_;
  std::vector<std::vector<Blob<Dtype>*>> in_blobs_, send_blobs_;  // per net copy
  std::vector<Kept> kept_;
  bool primed_ = false;        // ASYNC: the stage runs its fill ahead of the backwards
  Kept probe_;                // ASYNC, Reversible: one input per iteration, to measure its reconstruction
  long probing_ = -1;         // the micro-batch whose forward is to fill probe_ (a stem stage's hook)
  long backward_mb_ = -1;     // the micro-batch whose backward is running
  Blob<Dtype>* blocks_input_ = nullptr;  // Reversible: the first block's bottom
  long last_forward_mb_ = -1;  // the micro-batch whose activations the net (RECOMPUTE) holds
  int last_forward_copy_ = -1;  // the copy of the net that ran the last forward
  long forwards_ = 0, backwards_ = 0;  // micro-batches since the start (ASYNC keeps counting across iterations)
  std::vector<Blob<Dtype>*> no_outputs_;

  std::unique_ptr<StageLink<Dtype>> link_;  // to the neighbouring stages
  MPI_Comm stage_comm_ = MPI_COMM_NULL;
  std::unique_ptr<Allreduce> stage_allreduce_, world_allreduce_;
  // Replicas: the reducer, on communicators of its own among the stage's replicas (one per thread).
  std::vector<MPI_Comm> reducer_comms_;
  std::unique_ptr<GradientReducer<Dtype>> reducer_;
  bool last_backward_ = false;   // the running backward is the iteration's last: its layers' gradients are final
  int iter_ = 0;                 // the iteration running
  std::unique_ptr<MpiCollectives> world_collectives_;
  std::unique_ptr<MpiCollectives> stage_collectives_;  // over the stage's replicas (several replicas only)
  // This replica's stages (several stages only).
  MPI_Comm parts_comm_ = MPI_COMM_NULL;
  std::unique_ptr<Allreduce> parts_allreduce_;
  std::unique_ptr<MpiCollectives> parts_collectives_;
  PipelineStats stats_;
  Timeline timeline_;
  std::string timeline_file_;
};

}  // namespace strata
