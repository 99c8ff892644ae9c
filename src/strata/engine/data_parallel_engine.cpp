#include "strata/engine/data_parallel_engine.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/device.hpp"
#include "strata/engine/consistency.hpp"
#include "strata/math_functions.hpp"
#include "strata/parallel.hpp"
#include "strata/util/fault_injection.hpp"
#include "strata/util/io.hpp"

namespace strata {

DataParallelOptions DataParallelOptions::FromProto(const CommParameter& p, bool gpu) {
  DataParallelOptions o;
  o.overlap = p.overlap();
  o.chunk_bytes = p.chunk_bytes();
  o.threads = static_cast<int>(p.threads());
  if (gpu && p.gpu_path() == CommParameter::HOST && !p.has_threads())
    o.threads = std::min(kMaxGpuHostThreads, cores_per_local_rank());
  o.fusion_bytes = p.fusion_bytes();
  o.checksum_interval = p.checksum_interval();
  o.poll_sleep_us = static_cast<int>(p.poll_sleep_us());
  o.gpu_path = p.gpu_path();
  STRATA_REQUIRE(o.chunk_bytes >= 64) << "comm_param.chunk_bytes must be at least 64, got " << o.chunk_bytes;
  STRATA_REQUIRE(o.threads >= 1 && o.threads <= 16) << "comm_param.threads must be in [1, 16], got " << o.threads;
  STRATA_REQUIRE(o.checksum_interval >= 0) << "comm_param.checksum_interval must not be negative";
  STRATA_REQUIRE(p.poll_sleep_us() <= 100000) << "comm_param.poll_sleep_us must be at most 100000, got "
                                              << p.poll_sleep_us();
  return o;
}

// ---- setup ----

template <typename Dtype>
DataParallelEngine<Dtype>::DataParallelEngine(Net<Dtype>* net, Optimizer<Dtype>* optimizer,
                                              const SolverParameter& param, const Communicator& comm,
                                              const AllreducePolicy& policy, const DataParallelOptions& options)
    : net_(net),
      optimizer_(optimizer),
      iter_size_(param.iter_size()),
      display_(param.display()),
      comm_(comm),
      options_(options),
      ranks_(comm.size()),
      main_allreduce_(comm.watched(policy.create(comm.world()))),  // seen by the stall watchdog, if one runs
      collectives_(comm.world(), main_allreduce_.get(), comm.watch(comm.world())),
      plan_(*net_, options.fusion_bytes / sizeof(Dtype), options.chunk_bytes / sizeof(Dtype)),
      signals_(comm.size()),
      timeline_(!options.timeline_file.empty()) {
  const int threads = std::min(options_.threads, comm.num_comm_threads());
  STRATA_REQUIRE(threads >= 1) << "data-parallel training needs at least one communication thread";
  // Clipping and K-FAC need the whole reduced gradient: reduce every layer, then one Optimizer::Apply.
  whole_gradient_ = optimizer_->needs_whole_gradient();

  const size_t num_params = net_->learnable_params().size();
  param_remaining_.assign(num_params, 0);
  param_pending_.assign(num_params, 0);
  unit_remaining_ = plan_.unit_totals();
  for (const BucketPlan::Bucket& b : plan_.buckets()) packed_.emplace_back(b.packed() ? b.elements : 0);

  // GPU training: the chunks reach the communication threads through staging (none in CPU training).
  StagingSetup<Dtype> staging;
  for (const BucketPlan::Bucket& b : plan_.buckets()) {
    staging.buckets.emplace_back();
    for (int p : b.params) staging.buckets.back().push_back(net_->learnable_params()[p]);
  }
  staging.chunk_elems = plan_.chunk_elems();
  staging.path = options_.gpu_path;
  staging.world = comm.world();
  staging.stage_in_cpu_mode = options_.stage_in_cpu_mode;
  staging_ = MakeGradientStaging(staging);
  // On the CPU, each chunk is scaled and applied in one sweep right after its allreduce, while it is still in
  // cache; the layer's update is then done when its last chunk is. (Staged chunks, GPU training, come back as
  // sums and are applied by Optimizer::UpdateLayer.)
  one_pass_updates_ = !whole_gradient_ && !staging_ && optimizer_->updates_in_one_pass();
  if (one_pass_updates_) optimizer_->AllocateUpdateState();  // before several threads update slices of one param

  net_->ClearParamDiffs();
  BroadcastParams();

  for (int k = 0; k < threads; ++k) {
    auto w = std::make_unique<Worker>();
    w->index = k;
    w->allreduce = comm.watched(policy.create(comm.thread_comm(k)));
    workers_.push_back(std::move(w));
  }
  for (int k = 0; k < threads; ++k) workers_[k]->thread = std::thread([this, k] { WorkerLoop(k); });
  AttachHooks();
  LOG_IF(INFO, comm.rank() == 0) << "Data-parallel training on " << ranks_ << " ranks ("
                                 << comm.topology().describe() << "): overlap " << (options_.overlap ? "on" : "off") << ", " << threads
                                 << " communication thread(s), chunks of " << human_bytes(options_.chunk_bytes)
                                 << ", " << plan_.num_buckets() << " reduction unit(s), allreduce "
                                 << policy.describe() << (staging_ ? ", gradients by " + staging_->describe() : "");
}

template <typename Dtype>
void DataParallelEngine<Dtype>::AttachHooks() {
  // Owned by this engine: the destructor takes them off the net, which may go on with another engine.
  net_->add_before_forward_hook(
      [this](int i) {
        if (i == net_->num_layers() / 2) MaybeInjectFault(FaultPoint::kForward, iter_);
        WaitForLayer(i);
        layer_t0_us_ = timeline_.now_us();
      },
      this);
  net_->add_after_forward_hook(
      [this](int i) { timeline_.Record(net_->layer_names()[i], "forward", 0, layer_t0_us_); }, this);
  net_->add_before_backward_hook([this](int) { layer_t0_us_ = timeline_.now_us(); }, this);
  net_->add_after_backward_hook(
      [this](int i) {
        timeline_.Record(net_->layer_names()[i], "backward", 0, layer_t0_us_);
        OnBackward(i);
      },
      this);
}

template <typename Dtype>
DataParallelEngine<Dtype>::~DataParallelEngine() {
  net_->RemoveHooks(this);
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    stop_ = true;
  }
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->queue.clear();
    }
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

// ---- one iteration (main thread) ----

template <typename Dtype>
Dtype DataParallelEngine<Dtype>::Iterate(Dtype rate, int iter) {
  const int iter_size = iter_size_;
  iter_ = iter;  // with rate_, what the submissions in OnBackward carry
  rate_ = rate;
  optimizer_->BeginIteration(iter);
  this->iteration_dropped_ = false;
  const double t_start = timeline_.now_us();
  Dtype loss = 0;
  for (int pass = 0; pass < iter_size; ++pass) {
    last_pass_ = pass == iter_size - 1;
    const double f0 = timeline_.now_us();
    Dtype l = 0;
    net_->Forward(&l);  // each layer first waits for its own parameters' update (WaitForLayer)
    if (!layouts_agreed_) AgreeOnParamLayouts();  // the communication threads have no work yet
    loss += l;
    optimizer_->BeforeBackward(pass);
    const double b0 = timeline_.now_us();
    stats_.forward_ms += (b0 - f0) / 1000;
    if (pass == 0 && backward_end_us_ > 0) {
      // Forward waited for every update of the previous iteration: its last one is known now.
      std::lock_guard<std::mutex> lock(state_mutex_);
      stats_.tail_ms += std::max(0.0, last_update_us_ - backward_end_us_) / 1000;
      ++stats_.tails;
    }
    net_->Backward();  // the last pass submits each layer's buckets as backward leaves it (OnBackward)
    backward_end_us_ = timeline_.now_us();
    stats_.backward_ms += (backward_end_us_ - b0) / 1000;
    // A signal is honoured within one micro-batch, whatever iter_size is: the iteration is dropped, not applied.
    if (!last_pass_ && StopAgreed()) {
      this->iteration_dropped_ = true;
      return loss / (pass + 1);
    }
  }
  loss /= iter_size;
  RequireFiniteLoss(loss, iter);
  if (!options_.overlap) {
    for (int L = net_->num_layers() - 1; L >= 0; --L) {
      for (int b : plan_.buckets_after(L)) Submit(b);
    }
  }
  SignalAction request;
  if (signals_.TakeMessage(iter, &request)) {
    // On thread 0 on every rank, behind this iteration's gradients there.
    Task t{kControlTask};
    t.iter = iter;
    t.action = request;
    Enqueue(*workers_[0], t);
  }
  const double w0 = timeline_.now_us();
  if (whole_gradient_) {
    UpdateWholeGradient(rate, iter);
  } else if (!options_.overlap) {
    WaitAllUpdated();
  }
  stats_.wait_ms += (timeline_.now_us() - w0) / 1000;
  stats_.iteration_ms += (timeline_.now_us() - t_start) / 1000;
  ++stats_.iterations;
  return loss;
}

// Between two micro-batches: whether a signal reached any rank asking to stop. Every rank asks after the same
// micro-batch, on thread 0, where nothing of this iteration is queued yet (only its last micro-batch submits).
template <typename Dtype>
bool DataParallelEngine<Dtype>::StopAgreed() {
  const bool local = this->StopRequested();
  if (ranks_ == 1) return local;
  Task t{kStopQueryTask};
  t.action = local ? SignalAction::kStop : SignalAction::kNone;
  Enqueue(*workers_[0], t);
  return signals_.WaitForStopQuery();
}

// Clipping and K-FAC: wait for every reduction, then the optimizer updates with the whole gradient here.
template <typename Dtype>
void DataParallelEngine<Dtype>::UpdateWholeGradient(Dtype rate, int iter) {
  {
    std::unique_lock<std::mutex> lock(state_mutex_);
    state_cv_.wait(lock, [this] { return unreduced_params_ == 0; });
  }
  optimizer_->Apply(rate, iter);
  if (!optimizer_->gradients_zeroed()) net_->ClearParamDiffs();
  std::lock_guard<std::mutex> lock(state_mutex_);
  last_update_us_ = timeline_.now_us();
  std::fill(param_pending_.begin(), param_pending_.end(), 0);
  pending_params_ = 0;
  unit_remaining_ = plan_.unit_totals();
}

template <typename Dtype>
void DataParallelEngine<Dtype>::OnBackward(int layer_id) {
  if (!options_.overlap || !last_pass_ || optimizer_->in_statistics_pass()) return;
  for (int b : plan_.buckets_after(layer_id)) Submit(b);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::Submit(int bucket_id) {
  const BucketPlan::Bucket& b = plan_.bucket(bucket_id);
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (int p : b.params) {
      CHECK(!param_pending_[p]) << "gradient submitted twice";
      param_pending_[p] = 1;
      param_remaining_[p] = static_cast<size_t>(net_->learnable_params()[p]->count());
      ++pending_params_;
      ++unreduced_params_;
    }
  }
  // Here, on the main thread: the threads then update slices of each param with its memory in one layout.
  if (one_pass_updates_) {
    for (int p : b.params) optimizer_->AlignLayouts(p);
  }
  if (staging_) staging_->Stage(bucket_id);
  // One task per chunk of a single gradient; a packed bucket is one task (it is at most fusion_bytes).
  for (const ElementRange& c : plan_.chunks(bucket_id)) {
    Enqueue(*workers_[next_task_++ % workers_.size()], Task{bucket_id, c.offset, c.count, rate_, iter_});
  }
}

template <typename Dtype>
void DataParallelEngine<Dtype>::Enqueue(Worker& w, const Task& t) {
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.queue.push_back(t);
  }
  w.cv.notify_one();
}

template <typename Dtype>
void DataParallelEngine<Dtype>::WaitForLayer(int layer_id) {
  const auto& reads = plan_.reads(layer_id);
  if (reads.empty()) return;
  std::unique_lock<std::mutex> lock(state_mutex_);
  auto ready = [&] {
    for (int p : reads)
      if (param_pending_[p]) return false;
    return true;
  };
  if (ready()) return;
  const double t0 = timeline_.now_us();
  state_cv_.wait(lock, ready);
  const double waited_ms = (timeline_.now_us() - t0) / 1000;
  stats_.wait_ms += waited_ms;
  stats_.forward_wait_ms += waited_ms;
  lock.unlock();
  if (timeline_.enabled()) timeline_.Record("wait " + net_->layer_names()[layer_id], "wait", 0, t0);
}

// ---- communication threads ----

template <typename Dtype>
void DataParallelEngine<Dtype>::WorkerLoop(int k) {
  Worker& w = *workers_[k];
  // Waiting for the other ranks, this thread sleeps between polls instead of taking turns with the
  // computation on its core (comm_param.poll_sleep_us; 0: MPI's own polling waits).
  comm_detail::set_thread_poll_sleep_us(options_.poll_sleep_us);
  // And where the allreduce can be woken by the other ranks (shm), it sleeps in the kernel until they arrive.
  comm_detail::set_thread_blocking_waits(true);
  bind_gpu_thread();  // a new thread starts on device 0; the updates and copies must go to this rank's GPU
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      // Idle threads sleep on the condition variable rather than spin: the compute thread keeps its core.
      w.cv.wait(lock, [&] { return stop_ || !w.queue.empty(); });
      if (w.queue.empty()) return;
      t = w.queue.front();
      w.queue.pop_front();
    }
    if (t.bucket == kControlTask) {
      signals_.Reduce(t.iter, t.action, *w.allreduce);
    } else if (t.bucket == kStopQueryTask) {
      signals_.ReduceStopQuery(t.action, *w.allreduce);
    } else {
      Reduce(w, t);
    }
  }
}

// Sums one chunk over the ranks and, with one-pass updates, applies it at once.
template <typename Dtype>
void DataParallelEngine<Dtype>::Reduce(Worker& w, const Task& t) {
  const double t0 = timeline_.now_us();
  const BucketPlan::Bucket& b = plan_.bucket(t.bucket);
  const auto& params = net_->learnable_params();
  MaybeInjectFault(FaultPoint::kAllreduce, t.iter);
  if (staging_) {
    // GPU training: summed in host staging (or by NCCL), and back on the device when this returns.
    staging_->Reduce(t.bucket, t.offset, t.count, *w.allreduce);
  } else if (!b.packed()) {
    // The gradient as it is (in a layer's CustomLayout, aligned in Submit): every rank arranges it alike.
    Dtype* g = params[b.params[0]]->mutable_cpu_diff_as_is() + t.offset;
    if (ranks_ > 1) w.allreduce->run(g, t.count);
  } else {
    Dtype* packed = packed_[t.bucket].data();
    size_t at = 0;
    for (int p : b.params) {
      std::memcpy(packed + at, params[p]->cpu_diff_as_is(), sizeof(Dtype) * params[p]->count());
      at += params[p]->count();
    }
    if (ranks_ > 1) w.allreduce->run(packed, b.elements);
    at = 0;
    for (int p : b.params) {
      std::memcpy(params[p]->mutable_cpu_diff_as_is(), packed + at, sizeof(Dtype) * params[p]->count());
      at += params[p]->count();
    }
  }
  const std::string name =
      timeline_.enabled() ? net_->param_display_names()[b.params[0]] + (b.packed() ? " (packed)" : "") : "";
  timeline_.Record(name, "allreduce", 1 + w.index, t0);
  const double t1 = timeline_.now_us();
  if (one_pass_updates_) {
    const Dtype scale = optimizer_->gradient_scale();
    if (!b.packed()) {
      optimizer_->UpdateSlice(b.params[0], t.offset, t.offset + t.count, t.rate, t.iter, scale);
    } else {
      for (int p : b.params) {
        optimizer_->UpdateSlice(p, 0, static_cast<size_t>(params[p]->count()), t.rate, t.iter, scale);
      }
    }
    timeline_.Record(name, "update", 1 + w.index, t1);
  }
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    busy_us_ += t1 - t0;
  }
  ParamsReduced(t);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::ParamsReduced(const Task& t) {
  const BucketPlan::Bucket& b = plan_.bucket(t.bucket);
  std::vector<int> finished_units;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (int p : b.params) {
      const size_t done = b.packed() ? param_remaining_[p] : t.count;
      param_remaining_[p] -= done;
      if (param_remaining_[p] != 0) continue;
      --unreduced_params_;
      const int u = plan_.unit_of(p);
      if (--unit_remaining_[u] == 0) finished_units.push_back(u);
    }
    if (whole_gradient_) {
      state_cv_.notify_all();
      return;  // the main thread updates with the whole gradient
    }
  }
  for (int u : finished_units) FinishUnit(u, t.rate, t.iter);
}

// The last chunk of layer `layer_id`'s gradients is reduced: update the layer (unless every chunk already was)
// and let its next forward go.
template <typename Dtype>
void DataParallelEngine<Dtype>::FinishUnit(int layer_id, Dtype rate, int iter) {
  const double t0 = timeline_.now_us();
  if (!one_pass_updates_) optimizer_->UpdateLayer(layer_id, rate, iter);
  const std::vector<int>& params = plan_.unit_params(layer_id);
  if (!one_pass_updates_) {  // one-pass updates already zeroed the gradients
    for (int p : params) net_->learnable_params()[p]->clear_diff();
    timeline_.Record(net_->layer_names()[layer_id], "update", 1 + static_cast<int>(workers_.size()), t0);
  }
  std::lock_guard<std::mutex> lock(state_mutex_);
  for (int p : params) {
    param_pending_[p] = 0;
    --pending_params_;
  }
  unit_remaining_[layer_id] = static_cast<int>(params.size());
  last_update_us_ = timeline_.now_us();
  state_cv_.notify_all();
}

// ---- between iterations ----

template <typename Dtype>
void DataParallelEngine<Dtype>::WaitAllUpdated() {
  std::unique_lock<std::mutex> lock(state_mutex_);
  state_cv_.wait(lock, [this] { return pending_params_ == 0; });
}

template <typename Dtype>
void DataParallelEngine<Dtype>::AverageStatistics() {
  for (int p : plan_.statistic_params()) {
    Blob<Dtype>* blob = net_->learnable_params()[p];
    collectives_.AllreduceMean(blob->mutable_cpu_data(), static_cast<size_t>(blob->count()));
  }
}

template <typename Dtype>
void DataParallelEngine<Dtype>::Drain() {
  WaitAllUpdated();
  // Control messages too: a rank whose queue still held one at destruction would leave the others in it.
  signals_.WaitIdle();
  AverageStatistics();
}

template <typename Dtype>
void DataParallelEngine<Dtype>::AfterIteration(int iterations_done) {
  iter_ = iterations_done;
  if (options_.checksum_interval > 0 && iterations_done % options_.checksum_interval == 0) {
    CheckConsistency(iterations_done);
  }
  if (display_ > 0 && iterations_done % display_ == 0) LogStats(iterations_done);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::Finish(int iterations_done) {
  CheckConsistency(iterations_done);
  if (timeline_.enabled()) {
    timeline_.Write(options_.timeline_file, &collectives_);
    LOG_IF(INFO, comm_.rank() == 0) << "Wrote timeline " << options_.timeline_file;
  }
}

template <typename Dtype>
void DataParallelEngine<Dtype>::BroadcastParams() {
  if (ranks_ == 1) return;
  const MPI_Datatype type = mpi_type_of(data_type_of<Dtype>());
  for (Blob<Dtype>* p : net_->learnable_params()) {
    if (p->count() == 0) continue;
    STRATA_MPI_CHECK(MPI_Bcast(p->mutable_cpu_data(), p->count(), type, 0, comm_.world()));
  }
}

template <typename Dtype>
void DataParallelEngine<Dtype>::AgreeOnParamLayouts() {
  layouts_agreed_ = true;
  if (ranks_ == 1) return;
  uint64_t h = kFnv1aBasis;
  for (Blob<Dtype>* p : net_->learnable_params()) {
    const CustomLayoutPtr l = p->data_custom_layout();
    const std::string name = (l ? l->name() : "plain") + ";";
    h = Fnv1a(name.data(), name.size(), h);
  }
  if (SameOnAllRanks(h, comm_.world())) return;
  LOG_IF(WARNING, comm_.rank() == 0)
      << "The ranks keep their weights in different oneDNN layouts (CPUs of different kinds?): every rank keeps "
         "them plain from now on, and its gradients are reordered for the allreduce";
  set_param_layouts_enabled(false);
  for (Blob<Dtype>* p : net_->learnable_params()) {
    p->cpu_data();
    p->cpu_diff();
  }
}

template <typename Dtype>
uint64_t DataParallelEngine<Dtype>::WeightsDigest() const {
  return strata::WeightsDigest(*net_);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::CheckConsistency(int iter) {
  Drain();
  const StallWatch::Scope watched(comm_.watch(comm_.world()));  // the digests' allreduce: a collective all wait in
  CheckReplicasAgree(*net_, comm_.world(), iter);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::LogStats(int iter) {
  Stats s = stats_;
  stats_ = Stats();
  double busy_us = 0;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    busy_us = busy_us_;
    busy_us_ = 0;
  }
  if (comm_.rank() != 0 || s.iterations == 0) return;
  const double n = s.iterations;
  const double exposed = s.wait_ms / n;
  const double iteration = s.iteration_ms / n;
  const double busy = busy_us / 1000 / n;
  const double tail = s.tails > 0 ? s.tail_ms / s.tails : 0;
  // Overlap ratio: the share of the time spent in allreduces that the computation hid.
  const double ratio = busy > 0 ? std::min(1.0, std::max(0.0, 1 - exposed / busy)) : 1;
  char line[320];
  std::snprintf(line, sizeof(line),
                "Iteration %d, per iteration: forward %.2f ms, backward %.2f ms, exposed communication %.2f ms "
                "(%.1f%% of %.2f ms), allreduce busy %.2f ms, comm tail after backward %.2f ms, overlap ratio %.2f",
                iter, (s.forward_ms - s.forward_wait_ms) / n, s.backward_ms / n, exposed,
                iteration > 0 ? 100 * exposed / iteration : 0, iteration, busy, tail, ratio);
  LOG(INFO) << line;
}

STRATA_INSTANTIATE_CLASS(DataParallelEngine);

}  // namespace strata
