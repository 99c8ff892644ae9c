#include "strata/comm/gradient_sync.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/mpi_collectives.hpp"
#include "strata/device.hpp"
#include "strata/math_functions.hpp"
#include "strata/util/io.hpp"

namespace strata {

GradientSyncOptions GradientSyncOptions::FromProto(const CommParameter& p) {
  GradientSyncOptions o;
  o.overlap = p.overlap();
  o.chunk_bytes = p.chunk_bytes();
  o.threads = static_cast<int>(p.threads());
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

template <typename Dtype>
GradientSync<Dtype>::GradientSync(Solver<Dtype>* solver, const Communicator& comm, const AllreducePolicy& policy,
                                  const GradientSyncOptions& options)
    : solver_(solver), net_(solver->net()), comm_(comm), options_(options), ranks_(comm.size()) {
  epoch_ = std::chrono::steady_clock::now();
  timeline_ = !options_.timeline_file.empty();
  // Clipping and K-FAC need the whole reduced gradient: reduce every layer, then one ApplyUpdate.
  whole_gradient_ = solver_->needs_whole_gradient();
  const int threads = std::min(options_.threads, comm.num_comm_threads());
  STRATA_REQUIRE(threads >= 1) << "data-parallel training needs at least one communication thread";
  main_allreduce_ = policy.create(comm.world());
  // The solver's own collectives (K-FAC) run on the main thread too, through the same allreduce.
  solver_->set_collectives(std::make_shared<MpiSolverCollectives>(comm.world(), main_allreduce_.get()));

  // The order in which gradients become final during backward, and the update unit of each.
  const int num_layers = net_->num_layers();
  const auto& lr = net_->params_lr();
  const size_t num_params = net_->learnable_params().size();
  bucket_of_param_.assign(num_params, -1);
  unit_of_param_.assign(num_params, -1);
  unit_total_.assign(num_layers, 0);
  std::vector<int> order;
  for (int L = num_layers - 1; L >= 0; --L) {
    for (int p : net_->learnable_params_final_after(L)) {
      unit_of_param_[p] = L;
      if (lr[p] == 0) continue;  // no gradient to reduce (frozen weights, BatchNorm statistics)
      order.push_back(p);
      ++unit_total_[L];
    }
  }
  for (size_t p = 0; p < num_params; ++p) {
    if (net_->learnable_param_is_statistic(static_cast<int>(p))) statistic_params_.push_back(static_cast<int>(p));
  }
  unit_remaining_ = unit_total_;

  // Buckets: consecutive small gradients (in backward order) fused up to fusion_bytes; others alone.
  const size_t fusion_elems = options_.fusion_bytes / sizeof(Dtype);
  layer_buckets_.assign(num_layers, {});
  auto close = [&](Bucket& b) {
    if (b.params.empty()) return;
    if (b.params.size() > 1) b.fused.resize(b.elements);
    const int id = static_cast<int>(buckets_.size());
    for (int p : b.params) bucket_of_param_[p] = id;
    layer_buckets_[unit_of_param_[b.params.back()]].push_back(id);
    buckets_.push_back(std::move(b));
    b = Bucket();
  };
  Bucket open;
  for (int p : order) {
    const size_t n = static_cast<size_t>(net_->learnable_params()[p]->count());
    if (n == 0) continue;
    if (n >= fusion_elems || fusion_elems == 0) {
      close(open);
      Bucket alone;
      alone.params = {p};
      alone.elements = n;
      close(alone);
      continue;
    }
    if (open.elements + n > fusion_elems) close(open);
    open.params.push_back(p);
    open.elements += n;
  }
  close(open);
  // Empty gradients are "reduced" from the start.
  for (int p : order) {
    if (bucket_of_param_[p] < 0) {
      --unit_total_[unit_of_param_[p]];
      --unit_remaining_[unit_of_param_[p]];
    }
  }

  layer_reads_.assign(num_layers, {});
  for (int L = 0; L < num_layers; ++L) {
    for (int p : net_->learnable_params_of_layer(L)) {
      if (bucket_of_param_[p] >= 0) layer_reads_[L].push_back(p);
    }
  }
  param_remaining_.assign(num_params, 0);
  param_pending_.assign(num_params, 0);

  // GPU training: the chunks reach the communication threads through staging (none in CPU training).
  StagingSetup<Dtype> staging;
  for (const Bucket& b : buckets_) {
    staging.buckets.emplace_back();
    for (int p : b.params) staging.buckets.back().push_back(net_->learnable_params()[p]);
  }
  staging.chunk_elems = options_.chunk_bytes / sizeof(Dtype);
  staging.path = options_.gpu_path;
  staging.world = comm.world();
  staging.stage_in_cpu_mode = options_.stage_in_cpu_mode;
  staging_ = MakeGradientStaging(staging);
  // On the CPU, each chunk is averaged and applied in one sweep right after its allreduce, while it is still
  // in cache; the layer's update is then done when its last chunk is. (Staged chunks, GPU training, come back
  // averaged and are applied by update_layer.)
  fused_update_ = !whole_gradient_ && !staging_ && solver_->updates_in_one_pass();
  if (fused_update_) solver_->AllocateUpdateState();  // before several threads update slices of one param

  net_->ClearParamDiffs();
  BroadcastParams();

  for (int k = 0; k < threads; ++k) {
    auto w = std::make_unique<Worker>();
    w->index = k;
    w->allreduce = policy.create(comm.thread_comm(k));
    workers_.push_back(std::move(w));
  }
  for (int k = 0; k < threads; ++k) workers_[k]->thread = std::thread([this, k] { WorkerLoop(k); });

  net_->add_before_forward_hook([this](int i) {
    WaitForLayer(i);
    layer_t0_us_ = now_us();
  });
  net_->add_after_forward_hook([this](int i) {
    if (timeline_) Record(net_->layer_names()[i], "forward", 0, layer_t0_us_);
  });
  net_->add_before_backward_hook([this](int) { layer_t0_us_ = now_us(); });
  net_->add_after_backward_hook([this](int i) {
    if (timeline_) Record(net_->layer_names()[i], "backward", 0, layer_t0_us_);
    OnBackward(i);
  });
  solver_->set_iteration_function([this] { return Iterate(); });
  solver_->set_drain_function([this] { Drain(); });
  solver_->set_action_agreement([this](SignalAction local) { return AgreeOnAction(local); });
  solver_->set_score_reducer([this](std::vector<Dtype>* scores) {
    if (ranks_ == 1 || scores->empty()) return;
    main_allreduce_->run(scores->data(), scores->size());
    for (auto& s : *scores) s /= ranks_;
  });
  solver_->add_iteration_callback([this](int iter) {
    if (options_.checksum_interval > 0 && iter % options_.checksum_interval == 0) CheckConsistency(iter);
    const int display = solver_->param().display();
    if (display > 0 && iter % display == 0) LogStats(iter);
  });
  LOG_IF(INFO, comm.rank() == 0) << "Data-parallel training on " << ranks_ << " ranks: overlap "
                                 << (options_.overlap ? "on" : "off") << ", " << threads
                                 << " communication thread(s), chunks of " << human_bytes(options_.chunk_bytes)
                                 << ", " << buckets_.size() << " reduction unit(s), allreduce "
                                 << policy.describe() << (staging_ ? ", gradients by " + staging_->describe() : "");
}

template <typename Dtype>
GradientSync<Dtype>::~GradientSync() {
  solver_->set_collectives(nullptr);  // they use main_allreduce_
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

template <typename Dtype>
double GradientSync<Dtype>::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
}

template <typename Dtype>
void GradientSync<Dtype>::Record(const std::string& name, const char* category, int tid, double t0_us) {
  const double t1 = now_us();
  std::lock_guard<std::mutex> lock(events_mutex_);
  events_.push_back({name, category, tid, t0_us, t1 - t0_us});
}

template <typename Dtype>
Dtype GradientSync<Dtype>::Iterate() {
  const Dtype rate = solver_->current_rate();
  const int iter = solver_->iter();
  const int iter_size = solver_->param().iter_size();
  const double t_start = now_us();
  Dtype loss = 0;
  for (int pass = 0; pass < iter_size; ++pass) {
    last_pass_ = pass == iter_size - 1;
    const double f0 = now_us();
    Dtype l = 0;
    net_->Forward(&l);
    loss += l;
    solver_->BeforeBackward(pass);
    const double b0 = now_us();
    stats_.forward_ms += (b0 - f0) / 1000;
    if (pass == 0 && backward_end_us_ > 0) {
      // Forward waited for every update of the previous iteration: its last one is known now.
      std::lock_guard<std::mutex> lock(state_mutex_);
      stats_.tail_ms += std::max(0.0, last_update_us_ - backward_end_us_) / 1000;
      ++stats_.tails;
    }
    // Submissions in OnBackward need this iteration's rate and number.
    pending_rate_ = rate;
    pending_iter_ = iter;
    net_->Backward();
    backward_end_us_ = now_us();
    stats_.backward_ms += (backward_end_us_ - b0) / 1000;
  }
  loss /= iter_size;
  solver_->CheckLoss(loss);
  if (!options_.overlap) {
    for (int L = net_->num_layers() - 1; L >= 0; --L) {
      for (int b : layer_buckets_[L]) Submit(b);
    }
  }
  SubmitControl(iter);
  if (whole_gradient_) {
    // The whole reduced gradient (clipping: its norm; K-FAC): wait for every reduction, update here.
    const double w0 = now_us();
    {
      std::unique_lock<std::mutex> lock(state_mutex_);
      state_cv_.wait(lock, [this] { return unreduced_params_ == 0; });
    }
    solver_->ApplyUpdate();
    net_->ClearParamDiffs();
    std::lock_guard<std::mutex> lock(state_mutex_);
    last_update_us_ = now_us();
    std::fill(param_pending_.begin(), param_pending_.end(), 0);
    pending_params_ = 0;
    unit_remaining_ = unit_total_;
    stats_.wait_ms += (now_us() - w0) / 1000;
  } else if (!options_.overlap) {
    const double w0 = now_us();
    WaitAllUpdated();
    stats_.wait_ms += (now_us() - w0) / 1000;
  }
  stats_.iteration_ms += (now_us() - t_start) / 1000;
  ++stats_.iterations;
  return loss;
}

template <typename Dtype>
void GradientSync<Dtype>::OnBackward(int layer_id) {
  if (!options_.overlap || !last_pass_ || solver_->in_statistics_pass()) return;
  for (int b : layer_buckets_[layer_id]) Submit(b);
}

template <typename Dtype>
void GradientSync<Dtype>::Submit(int bucket_id) {
  const Bucket& b = buckets_[bucket_id];
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
  if (staging_) staging_->Stage(bucket_id);
  // One task per chunk of a single gradient; a fused bucket is one task (it is at most fusion_bytes).
  for (const ElementRange& c : CutBucket(b.elements, b.params.size() > 1, options_.chunk_bytes / sizeof(Dtype))) {
    Task t{bucket_id, c.offset, c.count, pending_rate_, pending_iter_};
    Worker& w = *workers_[next_task_++ % workers_.size()];
    {
      std::lock_guard<std::mutex> lock(w.mutex);
      w.queue.push_back(t);
    }
    w.cv.notify_one();
  }
}

template <typename Dtype>
void GradientSync<Dtype>::SubmitControl(int iter) {
  if (ranks_ == 1) return;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    ++pending_controls_;
    if (first_control_iter_ < 0) first_control_iter_ = iter;
  }
  Task t{kControlTask};
  t.iter = iter;
  t.action = local_action_;
  local_action_ = SignalAction::kNone;
  Worker& w = *workers_[0];  // the same thread on every rank, behind this iteration's gradients there
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.queue.push_back(t);
  }
  w.cv.notify_one();
}

template <typename Dtype>
void GradientSync<Dtype>::ReduceControl(Worker& w, const Task& t) {
  // How many ranks asked to stop and to snapshot: sums of small integers, exact in float.
  float requests[2] = {t.action == SignalAction::kStop ? 1.f : 0.f, t.action == SignalAction::kSnapshot ? 1.f : 0.f};
  w.allreduce->run(requests, 2);
  const SignalAction agreed = requests[0] > 0   ? SignalAction::kStop
                              : requests[1] > 0 ? SignalAction::kSnapshot
                                                : SignalAction::kNone;
  std::lock_guard<std::mutex> lock(state_mutex_);
  agreed_[t.iter] = agreed;
  --pending_controls_;
  state_cv_.notify_all();
}

template <typename Dtype>
SignalAction GradientSync<Dtype>::AgreeOnAction(SignalAction local) {
  if (ranks_ == 1) return local;
  // A stop outranks a snapshot when both are asked for before the next control task leaves.
  if (local == SignalAction::kStop || local_action_ == SignalAction::kNone) local_action_ = local;
  const int from = solver_->iter() - 2;
  std::unique_lock<std::mutex> lock(state_mutex_);
  if (first_control_iter_ < 0 || from < first_control_iter_) return SignalAction::kNone;
  state_cv_.wait(lock, [&] { return agreed_.count(from) > 0; });
  const SignalAction agreed = agreed_[from];
  agreed_.erase(agreed_.begin(), agreed_.upper_bound(from));
  if (agreed != SignalAction::kNone) {
    LOG_IF(INFO, comm_.rank() == 0) << "All ranks " << (agreed == SignalAction::kStop ? "stop" : "snapshot")
                                    << " at iteration " << solver_->iter() << " (requested at iteration " << from
                                    << ")";
  }
  return agreed;
}

template <typename Dtype>
void GradientSync<Dtype>::WorkerLoop(int k) {
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
      ReduceControl(w, t);
    } else {
      Reduce(w, t);
    }
  }
}

template <typename Dtype>
void GradientSync<Dtype>::Reduce(Worker& w, const Task& t) {
  const double t0 = now_us();
  Bucket& b = buckets_[t.bucket];
  const bool single = b.params.size() == 1;
  // The sum becomes the mean; the one-pass update folds this (and 1 / iter_size) into its sweep.
  const Dtype mean = Dtype(1) / ranks_;
  const bool average_here = ranks_ > 1 && !fused_update_;
  if (staging_) {
    // GPU training: reduced in host staging (or by NCCL), averaged, and back on the device when this returns.
    staging_->Reduce(t.bucket, t.offset, t.count, *w.allreduce);
  } else if (single) {
    Dtype* g = net_->learnable_params()[b.params[0]]->mutable_cpu_diff() + t.offset;
    if (ranks_ > 1) w.allreduce->run(g, t.count);
    if (average_here) cpu_scal(static_cast<int>(t.count), mean, g);
  } else {
    Dtype* fused = b.fused.data();
    size_t at = 0;
    for (int p : b.params) {
      Blob<Dtype>* blob = net_->learnable_params()[p];
      std::memcpy(fused + at, blob->cpu_diff(), sizeof(Dtype) * blob->count());
      at += blob->count();
    }
    if (ranks_ > 1) w.allreduce->run(fused, b.elements);
    if (average_here) cpu_scal(static_cast<int>(b.elements), mean, fused);
    at = 0;
    for (int p : b.params) {
      Blob<Dtype>* blob = net_->learnable_params()[p];
      std::memcpy(blob->mutable_cpu_diff(), fused + at, sizeof(Dtype) * blob->count());
      at += blob->count();
    }
  }
  const std::string& name = net_->param_display_names()[b.params[0]];
  if (timeline_) Record(name + (single ? "" : " (fused)"), "allreduce", 1 + w.index, t0);
  const double t1 = now_us();
  if (fused_update_) {
    const Dtype grad_scale = mean / solver_->param().iter_size();
    if (single) {
      solver_->UpdateSlice(b.params[0], t.offset, t.offset + t.count, t.rate, t.iter, grad_scale);
    } else {
      for (int p : b.params) {
        solver_->UpdateSlice(p, 0, static_cast<size_t>(net_->learnable_params()[p]->count()), t.rate, t.iter,
                             grad_scale);
      }
    }
    if (timeline_) Record(name + (single ? "" : " (fused)"), "update", 1 + w.index, t1);
  }
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    busy_us_ += t1 - t0;
  }
  ParamsReduced(t);
}

template <typename Dtype>
void GradientSync<Dtype>::ParamsReduced(const Task& t) {
  const Bucket& b = buckets_[t.bucket];
  std::vector<int> finished_units;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (int p : b.params) {
      const size_t done = b.params.size() == 1 ? t.count : param_remaining_[p];
      param_remaining_[p] -= done;
      if (param_remaining_[p] != 0) continue;
      --unreduced_params_;
      const int u = unit_of_param_[p];
      if (--unit_remaining_[u] == 0) finished_units.push_back(u);
    }
    if (whole_gradient_) {
      state_cv_.notify_all();
      return;  // the main thread updates with the whole gradient
    }
  }
  for (int u : finished_units) FinishUnit(u, t.rate, t.iter);
}

template <typename Dtype>
void GradientSync<Dtype>::FinishUnit(int layer_id, Dtype rate, int iter) {
  const double t0 = now_us();
  // One-pass updates already applied every chunk and zeroed its gradient.
  if (!fused_update_) solver_->update_layer(layer_id, rate, iter);
  std::vector<int> params;
  for (int p : net_->learnable_params_final_after(layer_id)) {
    if (bucket_of_param_[p] < 0) continue;
    if (fused_update_) {
      params.push_back(p);
      continue;
    }
    Blob<Dtype>* blob = net_->learnable_params()[p];
#ifdef STRATA_USE_CUDA
    // In GPU mode the update left the gradient on the device: zero it there rather than copy it back to do so.
    if (Strata::mode() == Strata::GPU) {
      gpu_set(blob->count(), Dtype(0), blob->mutable_gpu_diff());
      params.push_back(p);
      continue;
    }
#endif
    cpu_set(blob->count(), Dtype(0), blob->mutable_cpu_diff());
    params.push_back(p);
  }
  if (timeline_ && !fused_update_) {
    Record(net_->layer_names()[layer_id], "update", 1 + static_cast<int>(workers_.size()), t0);
  }
  std::lock_guard<std::mutex> lock(state_mutex_);
  for (int p : params) {
    param_pending_[p] = 0;
    --pending_params_;
  }
  unit_remaining_[layer_id] = unit_total_[layer_id];
  last_update_us_ = now_us();
  state_cv_.notify_all();
}

template <typename Dtype>
void GradientSync<Dtype>::WaitForLayer(int layer_id) {
  const auto& reads = layer_reads_[layer_id];
  if (reads.empty()) return;
  std::unique_lock<std::mutex> lock(state_mutex_);
  auto ready = [&] {
    for (int p : reads)
      if (param_pending_[p]) return false;
    return true;
  };
  if (ready()) return;
  const double t0 = now_us();
  state_cv_.wait(lock, ready);
  stats_.wait_ms += (now_us() - t0) / 1000;
  stats_.forward_wait_ms += (now_us() - t0) / 1000;
  if (timeline_) {
    lock.unlock();
    Record("wait " + net_->layer_names()[layer_id], "wait", 0, t0);
  }
}

template <typename Dtype>
void GradientSync<Dtype>::WaitAllUpdated() {
  std::unique_lock<std::mutex> lock(state_mutex_);
  // Control tasks too: a rank whose queue still held one at destruction would leave the others in it.
  state_cv_.wait(lock, [this] { return pending_params_ == 0 && pending_controls_ == 0; });
}

template <typename Dtype>
void GradientSync<Dtype>::AverageStatistics() {
  if (ranks_ == 1) return;
  for (int p : statistic_params_) {
    Blob<Dtype>* blob = net_->learnable_params()[p];
    if (blob->count() == 0) continue;
    main_allreduce_->run(blob->mutable_cpu_data(), static_cast<size_t>(blob->count()));
    blob->scale_data(Dtype(1) / ranks_);
  }
}

template <typename Dtype>
void GradientSync<Dtype>::Drain() {
  WaitAllUpdated();
  AverageStatistics();
}

template <typename Dtype>
void GradientSync<Dtype>::BroadcastParams() {
  if (ranks_ == 1) return;
  const MPI_Datatype type = mpi_type_of(data_type_of<Dtype>());
  for (Blob<Dtype>* p : net_->learnable_params()) {
    if (p->count() == 0) continue;
    STRATA_MPI_CHECK(MPI_Bcast(p->mutable_cpu_data(), p->count(), type, 0, comm_.world()));
  }
}

template <typename Dtype>
uint64_t GradientSync<Dtype>::WeightsDigest() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes of every parameter
  for (Blob<Dtype>* p : net_->learnable_params()) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(p->cpu_data());
    const size_t n = sizeof(Dtype) * static_cast<size_t>(p->count());
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

template <typename Dtype>
void GradientSync<Dtype>::CheckConsistency(int iter) {
  Drain();
  const uint64_t mine = WeightsDigest();
  uint64_t lo = 0, hi = 0;
  STRATA_MPI_CHECK(MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, comm_.world()));
  STRATA_MPI_CHECK(MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, comm_.world()));
  if (lo != hi) {
    std::ostringstream s;
    s << "the ranks' weights differ after iteration " << iter << " (rank " << comm_.rank() << " digest " << std::hex
      << mine << ")";
    mpi_abort(s.str());
  }
}

template <typename Dtype>
void GradientSync<Dtype>::LogStats(int iter) {
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

template <typename Dtype>
void GradientSync<Dtype>::WriteTimeline() {
  if (!timeline_) return;
  std::ostringstream mine;
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    for (size_t i = 0; i < events_.size(); ++i) {
      const Event& e = events_[i];
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f,\"dur\":%.1f", e.ts_us, e.dur_us);
      mine << "{\"name\":\"" << e.name << "\",\"cat\":\"" << e.category << "\",\"ph\":\"X\",\"pid\":" << comm_.rank()
           << ",\"tid\":" << e.tid << ",\"ts\":" << buf << "},\n";
    }
  }
  const std::string text = mine.str();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(ranks_), displs(ranks_);
  STRATA_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_.world()));
  std::string all;
  if (comm_.rank() == 0) {
    int total = 0;
    for (int r = 0; r < ranks_; ++r) {
      displs[r] = total;
      total += lens[r];
    }
    all.resize(total);
  }
  STRATA_MPI_CHECK(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                               comm_.world()));
  if (comm_.rank() != 0) return;
  while (!all.empty() && (all.back() == '\n' || all.back() == ',')) all.pop_back();
  std::string json = "{\"traceEvents\":[\n" + all + "\n],\"displayTimeUnit\":\"ms\"}\n";
  WriteFileAtomically(options_.timeline_file, json);
  LOG(INFO) << "Wrote timeline " << options_.timeline_file;
}

STRATA_INSTANTIATE_CLASS(GradientSync);

}  // namespace strata
