// GradientSync: data-parallel training with layer-wise, chunked, overlapped allreduce (the seed paper's
// section 4).
//
//   backward of layer L finishes   -> its final gradients are cut into chunks (small ones fused into buckets)
//                                      and queued to the communication threads; backward moves on at once
//   communication thread k         -> allreduces its chunks in order on its own communicator; on the CPU it
//                                      then averages and applies each chunk in one sweep (Solver::UpdateSlice)
//   last chunk of layer L reduced  -> layer L is updated (GPU, or a solver without a one-pass rule: that
//                                      thread runs update_layer(L) now and clears L's gradients)
//   next forward of layer i        -> waits only for the parameters layer i reads (overtaking)
//
// Every rank cuts the same gradients into the same chunks in the same order and deals chunk number k to
// thread k mod T, so the collectives on each thread's communicator match across ranks whatever the timing.
//
// GPU training: the gradients stay on the device; GradientStaging (strata/comm/gradient_staging.hpp) moves each
// chunk to pinned host memory on a copy stream as backward produces it and back after the allreduce (or reduces
// it on the device with NCCL), and a chunk counts as reduced once it is back on the device.
//
// Signals: SIGINT (stop) or SIGHUP (snapshot) can reach the ranks at different iterations, and a rank that
// stops or snapshots alone leaves the others waiting in a collective. So each iteration's local requests
// are summed across ranks by one more tiny allreduce queued on thread 0 behind that iteration's gradients,
// and every rank acts on the sum of iteration t at iteration t + 2, when it has long arrived (the forward of
// t + 1 already waited for every update of t).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/gradient_staging.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/solver.hpp"

namespace strata {

struct GradientSyncOptions {
  bool overlap = true;               // false: reduce everything after backward (the baseline)
  size_t chunk_bytes = 4 << 20;      // gradients larger than this are cut into chunks of this size
  int threads = 1;                   // communication threads, each with its own communicator
  size_t fusion_bytes = 0;           // gradients smaller than this are packed into buckets of this size
  int checksum_interval = 0;         // every N iterations, check that all ranks hold identical weights
  int poll_sleep_us = 0;             // > 0: waiting communication threads sleep this long between polls
  std::string timeline_file;         // Chrome-trace JSON of forward, backward, chunks and updates
  CommParameter::GpuPath gpu_path = CommParameter::HOST;  // GPU training: host staging or NCCL
  bool stage_in_cpu_mode = false;    // tests: CPU training through the HOST staging, with plain copies
  static GradientSyncOptions FromProto(const CommParameter& p);
};

template <typename Dtype>
class GradientSync {
 public:
  // Attaches to the solver's train net (hooks) and iteration function. `comm` must have at least
  // options.threads communication threads. Broadcasts rank 0's weights so every rank starts equal.
  GradientSync(Solver<Dtype>* solver, const Communicator& comm, const AllreducePolicy& policy,
               const GradientSyncOptions& options);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Waits for every pending update, then averages the statistic parameters (BatchNorm) across ranks.
  void Drain();
  // Copies rank 0's learnable parameters (statistics included) to every rank.
  void BroadcastParams();
  // A 64-bit digest of all parameter values; equal on every rank when training is consistent.
  uint64_t WeightsDigest() const;
  // Aborts the job if the ranks' weights differ.
  void CheckConsistency(int iter);
  // The solver's action agreement (see above): records this rank's request for iteration solver->iter()
  // and returns the action all ranks agreed on for iteration solver->iter() - 2.
  SignalAction AgreeOnAction(SignalAction local);
  // Writes the timeline (rank 0 gathers every rank's events). Collective.
  void WriteTimeline();

  // Accumulated over the iterations since the last display (main thread). wait_ms is the exposed
  // communication: the time the compute thread waited for reductions and updates, after backward (overlap
  // off, clipping) or in forward (waiting for a layer's update); forward_wait_ms is the forward part of it.
  // tail_ms sums, over `tails` iterations, the time from the end of backward to that iteration's last update.
  struct Stats {
    double forward_ms = 0, forward_wait_ms = 0, backward_ms = 0, wait_ms = 0, tail_ms = 0, iteration_ms = 0;
    int iterations = 0, tails = 0;
  };

 private:
  struct Task {
    int bucket;         // index into buckets_; kControlTask: the iteration's signal requests
    size_t offset = 0;  // element range inside a single-param bucket (chunking)
    size_t count = 0;
    Dtype rate = 0;     // the iteration this gradient belongs to, for its update
    int iter = 0;
    SignalAction action = SignalAction::kNone;  // a control task's local request
  };
  static constexpr int kControlTask = -1;
  // A unit of reduction: one parameter (cut into chunks) or several small ones fused.
  struct Bucket {
    std::vector<int> params;  // learnable param ids
    size_t elements = 0;
    std::vector<Dtype> fused;  // staging buffer when params.size() > 1
  };
  struct Worker {
    int index = 0;  // 0-based; its timeline row is index + 1
    std::thread thread;
    std::unique_ptr<Allreduce> allreduce;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Task> queue;
  };
  struct Event {
    std::string name;
    const char* category;
    int tid;
    double ts_us, dur_us;
  };

  Dtype Iterate();
  void OnBackward(int layer_id);
  void WaitForLayer(int layer_id);
  void Submit(int bucket);
  void WorkerLoop(int k);
  void Reduce(Worker& w, const Task& t);
  void SubmitControl(int iter);
  void ReduceControl(Worker& w, const Task& t);
  void ParamsReduced(const Task& t);
  void FinishUnit(int layer_id, Dtype rate, int iter);
  void WaitAllUpdated();
  void AverageStatistics();
  void LogStats(int iter);
  double now_us() const;
  void Record(const std::string& name, const char* category, int tid, double t0_us);

  Solver<Dtype>* solver_;
  Net<Dtype>* net_;
  const Communicator& comm_;
  GradientSyncOptions options_;
  int ranks_;
  std::unique_ptr<Allreduce> main_allreduce_;  // statistics, on the main thread's communicator

  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_param_;          // learnable id -> bucket (-1: not reduced, lr_mult 0)
  std::vector<int> unit_of_param_;            // learnable id -> the layer whose update applies it
  std::vector<std::vector<int>> layer_buckets_;  // buckets that become complete after layer L's backward
  std::vector<std::vector<int>> layer_reads_;    // learnable ids layer L reads in forward
  std::vector<int> statistic_params_;
  std::unique_ptr<GradientStaging<Dtype>> staging_;  // GPU training's path for gradients (null on the CPU)

  std::vector<std::unique_ptr<Worker>> workers_;
  uint64_t next_task_ = 0;
  bool stop_ = false;

  // Bookkeeping under state_mutex_.
  std::mutex state_mutex_;
  std::condition_variable state_cv_;
  std::vector<size_t> param_remaining_;  // elements still to reduce this iteration
  std::vector<int> unit_total_;          // reduced params per update unit (layer)
  std::vector<int> unit_remaining_;      // of those, still to reduce this iteration
  std::vector<char> param_pending_;      // submitted and not yet updated
  int pending_params_ = 0;               // submitted, not yet updated
  int unreduced_params_ = 0;             // submitted, not yet reduced
  bool last_pass_ = true;
  Dtype pending_rate_ = 0;  // the rate and number of the iteration whose backward is running
  int pending_iter_ = 0;
  bool whole_gradient_ = false;  // the solver updates the whole net at once (clipping, K-FAC)
  bool fused_update_ = false;    // each chunk is updated in one pass right after its allreduce (CPU, SGD family)
  // Signal agreement: the request polled at the start of this iteration (main thread), the agreed actions
  // by iteration and the control tasks not yet reduced (under state_mutex_), and the first iteration that
  // sent one (-1: none yet).
  SignalAction local_action_ = SignalAction::kNone;
  std::map<int, SignalAction> agreed_;
  int pending_controls_ = 0;
  int first_control_iter_ = -1;

  // Measurement.
  std::chrono::steady_clock::time_point epoch_;
  Stats stats_;
  double backward_end_us_ = 0;
  double last_update_us_ = 0;  // under state_mutex_
  double busy_us_ = 0;         // under state_mutex_: time the workers spent in allreduces since the last display
  double layer_t0_us_ = 0;
  bool timeline_ = false;
  std::mutex events_mutex_;
  std::vector<Event> events_;
};

}  // namespace strata
