// DataParallelEngine: data-parallel training with layer-wise, chunked, overlapped allreduce (the seed paper's
// section 4). One iteration, as Iterate runs it:
//
//   forward of layer i             -> first waits only for the parameters layer i reads (overtaking: the rest of
//                                      the previous iteration's updates may still be running)
//   backward of layer L finishes   -> the buckets complete after L (BucketPlan) are cut into chunks and queued to
//                                      the communication threads; backward moves on at once
//   communication thread k         -> allreduces its chunks in order on its own communicator (a sum); on the CPU
//                                      it then applies each chunk in one sweep (Optimizer::UpdateSlice, which
//                                      scales by Optimizer::gradient_scale)
//   last chunk of layer L reduced  -> layer L is updated (GPU, or a rule without a one-pass sweep: that thread
//                                      runs Optimizer::UpdateLayer(L) now and clears L's gradients)
//   end of backward                -> a control message with this rank's signal request follows the gradients
//                                      (SignalAgreement)
//
// The chunks, threads and readiness are the GradientReducer's (strata/engine/gradient_reducer.hpp), which deals
// them alike on every rank, so every rank ends with bit-identical weights (checked by comm_param.checksum_interval,
// and at the end of training).
//
// Optimizers that need the whole reduced gradient (clipping, K-FAC) get every bucket reduced, still overlapped with
// backward, and one Optimizer::Apply on the main thread. Overlap off reduces everything after backward (the baseline).
//
// GPU training: the gradients stay on the device; GradientStaging (strata/engine/gradient_staging.hpp) moves each
// chunk to pinned host memory on a copy stream as backward produces it and back after the allreduce (or sums it
// on the device with NCCL), and a chunk counts as reduced once it is back on the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/mpi_collectives.hpp"
#include "strata/engine/gradient_reducer.hpp"
#include "strata/engine/signal_agreement.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/engine/training_engine.hpp"
#include "strata/optimizer.hpp"

namespace strata {

struct DataParallelOptions {
  bool overlap = true;               // false: reduce everything after backward (the baseline)
  size_t chunk_bytes = 4 << 20;      // gradients larger than this are cut into chunks of this size
  int threads = 1;                   // communication threads, each with its own communicator
  size_t fusion_bytes = 0;           // gradients smaller than this are packed into buckets of this size
                                     // (comm_param.fusion_bytes)
  int checksum_interval = 0;         // every N iterations, check that all ranks hold identical weights
  int poll_sleep_us = 0;             // > 0: waiting communication threads sleep this long between polls
  bool low_layer_lane = false;       // thread 0 sums only the lowest layers' chunks (comm_param.low_layer_lane)
  std::string timeline_file;         // Chrome-trace JSON of forward, backward, chunks and updates
  CommParameter::GpuPath gpu_path = CommParameter::HOST;  // GPU training: host staging or NCCL
  bool stage_in_cpu_mode = false;    // tests: CPU training through the HOST staging, with plain copies
  // gpu: training on the GPU. There, with HOST staging and no comm_param.threads in the solver, each rank gets
  // a communication thread per core of its share of the machine, up to 8: a thread reduces its chunks one after
  // another (wait for the copy out, allreduce, wait for the copy back), so more threads keep more chunks in
  // flight (measured in docs/gpu.md).
  static DataParallelOptions FromProto(const CommParameter& p, bool gpu = false);
  static constexpr int kMaxGpuHostThreads = 8;
};

template <typename Dtype>
class DataParallelEngine : public TrainingEngine<Dtype> {
 public:
  // Attaches to the train net `net` (hooks), whose updates `optimizer` applies; `param` gives iter_size and
  // display. `comm` must have at least options.threads communication threads. Broadcasts rank 0's weights so every
  // rank starts equal.
  DataParallelEngine(Net<Dtype>* net, Optimizer<Dtype>* optimizer, const SolverParameter& param,
                     const Communicator& comm, const AllreducePolicy& policy, const DataParallelOptions& options);
  ~DataParallelEngine() override;
  DataParallelEngine(const DataParallelEngine&) = delete;
  DataParallelEngine& operator=(const DataParallelEngine&) = delete;

  Dtype Iterate(Dtype rate, int iter) override;
  // Waits for every pending update and control message, then averages the statistic parameters (BatchNorm).
  void Drain() override;
  SignalAction AgreeOnAction(SignalAction local, int iter) override { return signals_.Agree(local, iter); }
  void ReduceScores(std::vector<Dtype>* scores) override { collectives_.AllreduceMean(scores->data(), scores->size()); }
  // The consistency check (checksum_interval) and the per-display statistics line.
  void AfterIteration(int iterations_done) override;
  // Checks that every rank holds the same weights and writes the timeline (if asked for).
  void Finish(int iterations_done) override;
  int replicas() const override { return ranks_; }
  const GradientReducer<Dtype>& reducer() const { return *reducer_; }
  Collectives* collectives() override { return &collectives_; }

  // Copies rank 0's learnable parameters (statistics included) to every rank.
  void BroadcastParams();
  // After the first forward: whether every rank keeps each parameter in the same layout (a layer's CustomFormat,
  // the same on CPUs of one kind), so that the allreduce may sum the gradients as they are; where they differ,
  // every rank turns the layouts off and goes on with plain parameters. Collective.
  void AgreeOnParamLayouts();
  // Drains, then ends the job if the ranks' weights differ.
  void CheckConsistency(int iter);
  // A digest of this rank's weights (WeightsDigest).
  uint64_t WeightsDigest() const;

 private:
  // Accumulated over the iterations since the last display (main thread). wait_ms is the exposed
  // communication: the time the compute thread waited for reductions and updates, after backward (overlap
  // off, clipping) or in forward (waiting for a layer's update); forward_wait_ms is the forward part of it.
  // tail_ms sums, over `tails` iterations, the time from the end of backward to that iteration's last update.
  struct Stats {
    double forward_ms = 0, forward_wait_ms = 0, backward_ms = 0, wait_ms = 0, tail_ms = 0, iteration_ms = 0;
    int iterations = 0, tails = 0;
  };
  void AttachHooks();
  void OnBackward(int layer_id);
  void WaitForLayer(int layer_id);
  bool StopAgreed();
  void UpdateWholeGradient(Dtype rate, int iter);
  void AverageStatistics();
  void LogStats(int iter);

  Net<Dtype>* net_;
  Optimizer<Dtype>* optimizer_;
  int iter_size_;
  int display_;
  int iter_ = 0;  // the loop's iteration: the one running, or the next after AfterIteration
  const Communicator& comm_;
  DataParallelOptions options_;
  int ranks_;
  std::unique_ptr<Allreduce> main_allreduce_;  // collectives on the main thread's communicator
  MpiCollectives collectives_;
  SignalAgreement signals_;
  Timeline timeline_;
  std::unique_ptr<GradientReducer<Dtype>> reducer_;  // after signals_ and timeline_: its threads use them

  bool last_pass_ = true;
  bool layouts_agreed_ = false;
  Dtype rate_ = 0;  // the learning rate of the iteration running (iter_)
  bool whole_gradient_ = false;  // the optimizer updates the whole net at once (clipping, K-FAC)

  // Measurement.
  Stats stats_;
  double backward_end_us_ = 0;
  double layer_t0_us_ = 0;
};

}  // namespace strata
