// GradientReducer: sums a net's gradients over a group of ranks while backward runs, the one reducer of the
// data-parallel engine and of a pipeline stage's replicas.
//
//   main thread, backward leaves layer L -> SubmitAfter(L): the buckets complete after L (BucketPlan) are cut into
//                                            chunks and dealt to the communication threads; backward moves on
//   communication thread k               -> allreduces its chunks in order on its own communicator; with one-pass
//                                            updates (CPU, SGD family) it applies each chunk right after its sum
//   last chunk of layer L summed         -> with per-layer updates, that thread updates layer L (unless every chunk
//                                            already was) and releases L's next forward (WaitForLayer)
//   whole-gradient optimizers            -> WaitReduced, the caller applies the update, MarkUpdated
//
// Dealing is deterministic: every rank builds the same plan from the same net and deals chunk number k by the same
// rule, so the collectives on each thread's communicator match across ranks whatever the timing. By default chunk
// k goes to thread k mod T. With the low-layer lane (T >= 2), thread 0 takes only the chunks of the lowest layers
// (up to a thread's share of the elements), which the next forward needs first, and the other threads share the
// rest round-robin: the lowest layers' sums then never queue behind the top layers'.
//
// GPU training: the gradients stay on the device and GradientStaging moves each chunk to the host and back (or
// sums it there with NCCL); a chunk counts as summed once it is back on the device.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/comm/allreduce.hpp"
#include "strata/engine/bucket_plan.hpp"
#include "strata/engine/gradient_staging.hpp"
#include "strata/engine/timeline.hpp"
#include "strata/optimizer.hpp"

namespace strata {

template <typename Dtype>
struct ReducerSetup {
  Net<Dtype>* net = nullptr;
  Optimizer<Dtype>* optimizer = nullptr;
  MPI_Comm group = MPI_COMM_NULL;  // the ranks that sum (NCCL's unique id travels on it)
  // One per communication thread, each on its own communicator over the group. With run_inline: exactly one, used
  // on the submitting thread (MPI without MPI_THREAD_MULTIPLE beside a main thread that communicates too).
  std::vector<std::unique_ptr<Allreduce>> allreduces;
  bool run_inline = false;
  size_t fusion_elems = 0;   // gradients below this are packed into buckets of this size (0: none)
  size_t chunk_elems = 1 << 20;
  bool low_layer_lane = false;
  // true: each layer is updated as soon as its gradients are summed (Optimizer::UpdateLayer or, where the
  // optimizer can, UpdateSlice per chunk). false: the caller updates the whole gradient after WaitReduced.
  bool update_layers = true;
  // true: gradients are summed in the layout their layer keeps them in (the ranks agreed on it); false: plain.
  bool gradients_as_is = true;
  CommParameter::GpuPath gpu_path = CommParameter::HOST;
  bool stage_in_cpu_mode = false;
  int poll_sleep_us = 0;
  Timeline* timeline = nullptr;  // required (a disabled one keeps the clock); rows first_row + k: thread k's sums,
                                 // first_row + T: the per-layer updates
  int first_row = 1;
};

template <typename Dtype>
class GradientReducer {
 public:
  explicit GradientReducer(ReducerSetup<Dtype> setup);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Main thread. The gradients of the buckets complete after layer L's backward, for the update of (rate, iter).
  void SubmitAfter(int layer, Dtype rate, int iter);
  // Every bucket, top layer first (overlap off).
  void SubmitAll(Dtype rate, int iter);
  // Runs `task` on thread 0 (or inline) behind everything queued there: control messages that must follow the
  // gradients, in the same order on every rank.
  void Post(std::function<void(Allreduce&)> task);
  // Blocks until layer L's parameters are updated (overtaking: only what L reads); returns the microseconds
  // waited and records the wait in the timeline's row 0.
  double WaitForLayer(int layer);
  // Blocks until every submitted gradient is summed (update_layers false: the caller updates next).
  void WaitReduced();
  // The caller has updated the whole gradient: every submitted parameter is free again.
  void MarkUpdated();
  // Blocks until every submitted gradient is summed and updated.
  void WaitUpdated();

  const BucketPlan& plan() const { return plan_; }
  int threads() const { return static_cast<int>(workers_.size()); }
  bool one_pass_updates() const { return one_pass_updates_; }
  bool staged() const { return staging_ != nullptr; }
  // Buckets dealt to the low-layer lane (0: round-robin dealing).
  int lane_buckets() const { return lane_buckets_; }
  std::string describe() const;
  // Time the threads spent summing since the last call, and when the last layer update finished (timeline clock).
  double TakeBusyUs();
  double last_update_us();

 private:
  struct Task {
    int bucket = -1;  // -1: `post`
    size_t offset = 0;
    size_t count = 0;
    Dtype rate = 0;  // the iteration this gradient belongs to, for its update
    int iter = 0;
    std::function<void(Allreduce&)> post;
  };
  struct Worker {
    int index = 0;
    std::thread thread;
    std::unique_ptr<Allreduce> allreduce;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Task> queue;
  };

  void Submit(int bucket, Dtype rate, int iter);
  int ThreadFor(int bucket);
  void Enqueue(int thread, Task t);
  void WorkerLoop(Worker& w);
  void Run(Worker& w, const Task& t);
  void Reduce(Worker& w, const Task& t);
  void ChunkReduced(const Task& t);
  void FinishLayer(int layer, Dtype rate, int iter);

  Net<Dtype>* net_;
  Optimizer<Dtype>* optimizer_;
  int ranks_ = 1;
  bool update_layers_;
  bool as_is_;
  int poll_sleep_us_;
  Timeline* timeline_;
  int first_row_;
  BucketPlan plan_;
  std::vector<char> in_lane_;                        // per bucket: dealt to the low-layer lane (thread 0)
  int lane_buckets_ = 0;
  std::vector<std::vector<Dtype>> packed_;            // a packed bucket's staging buffer (empty for others)
  std::unique_ptr<GradientStaging<Dtype>> staging_;  // GPU training's path for gradients (null on the CPU)
  bool one_pass_updates_ = false;
  std::unique_ptr<Worker> inline_;                  // run_inline: the submitting thread's allreduce
  std::vector<std::unique_ptr<Worker>> workers_;
  uint64_t next_chunk_ = 0;
  bool stop_ = false;

  // Bookkeeping under state_mutex_.
  std::mutex state_mutex_;
  std::condition_variable state_cv_;
  std::vector<size_t> param_remaining_;  // elements still to sum this iteration
  std::vector<int> unit_remaining_;      // summed params of each update unit (layer) still to sum
  std::vector<char> param_pending_;      // submitted and not yet updated
  int pending_params_ = 0;
  int unreduced_params_ = 0;
  double busy_us_ = 0;
  double last_update_us_ = 0;
};

}  // namespace strata
