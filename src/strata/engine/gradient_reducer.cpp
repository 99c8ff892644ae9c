#include "strata/engine/gradient_reducer.hpp"

#include <algorithm>
#include <cstring>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/device.hpp"
#include "strata/util/fault_injection.hpp"
#include "strata/util/io.hpp"

namespace strata {

// ---- setup ----

template <typename Dtype>
GradientReducer<Dtype>::GradientReducer(ReducerSetup<Dtype> s)
    : net_(s.net),
      optimizer_(s.optimizer),
      update_layers_(s.update_layers),
      as_is_(s.gradients_as_is),
      poll_sleep_us_(s.poll_sleep_us),
      timeline_(s.timeline),
      first_row_(s.first_row),
      plan_(*s.net, s.fusion_elems, s.chunk_elems) {
  CHECK(timeline_ != nullptr) << "a GradientReducer records into its engine's timeline";
  CHECK(!s.allreduces.empty() && (!s.run_inline || s.allreduces.size() == 1)) << "bad reducer threads";
  STRATA_MPI_CHECK(MPI_Comm_size(s.group, &ranks_));
  const size_t num_params = net_->learnable_params().size();
  param_remaining_.assign(num_params, 0);
  param_pending_.assign(num_params, 0);
  unit_remaining_ = plan_.unit_totals();
  for (const BucketPlan::Bucket& b : plan_.buckets()) packed_.emplace_back(b.packed() ? b.elements : 0);

  // The low-layer lane: the lowest buckets, up to a thread's share of the elements, in the order of the net.
  in_lane_.assign(static_cast<size_t>(plan_.num_buckets()), 0);
  const size_t threads = s.run_inline ? 1 : s.allreduces.size();
  if (s.low_layer_lane && threads >= 2) {
    size_t total = 0;
    for (const BucketPlan::Bucket& b : plan_.buckets()) total += b.elements;
    size_t lane = 0;
    for (int b = plan_.num_buckets() - 1; b >= 0; --b) {  // buckets are in backward order: the last is lowest
      if (lane + plan_.bucket(b).elements > total / threads) break;
      lane += plan_.bucket(b).elements;
      in_lane_[static_cast<size_t>(b)] = 1;
      ++lane_buckets_;
    }
  }

  // GPU training: the chunks reach the communication threads through staging (none in CPU training).
  StagingSetup<Dtype> staging;
  for (const BucketPlan::Bucket& b : plan_.buckets()) {
    staging.buckets.emplace_back();
    for (int p : b.params) staging.buckets.back().push_back(net_->learnable_params()[p]);
  }
  staging.chunk_elems = plan_.chunk_elems();
  staging.path = s.gpu_path;
  staging.world = s.group;
  staging.stage_in_cpu_mode = s.stage_in_cpu_mode;
  staging_ = MakeGradientStaging(staging);
  // On the CPU, each chunk is scaled and applied in one sweep right after its allreduce, while it is still in
  // cache; the layer's update is then done when its last chunk is. (Staged chunks come back as sums and are applied
  // by Optimizer::UpdateLayer.)
  one_pass_updates_ = update_layers_ && as_is_ && !staging_ && optimizer_->updates_in_one_pass();
  if (one_pass_updates_) optimizer_->AllocateUpdateState();  // before several threads update slices of one param

  if (s.run_inline) {
    inline_ = std::make_unique<Worker>();
    inline_->allreduce = std::move(s.allreduces[0]);
    return;
  }
  for (size_t k = 0; k < s.allreduces.size(); ++k) {
    auto w = std::make_unique<Worker>();
    w->index = static_cast<int>(k);
    w->allreduce = std::move(s.allreduces[k]);
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* worker = w.get();
    w->thread = std::thread([this, worker] { WorkerLoop(*worker); });
  }
}

template <typename Dtype>
GradientReducer<Dtype>::~GradientReducer() {
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
std::string GradientReducer<Dtype>::describe() const {
  std::string s = (inline_ ? std::string("no communication thread") : std::to_string(threads()) +
                   " communication thread(s)") + ", chunks of " + human_bytes(plan_.chunk_elems() * sizeof(Dtype)) +
                  ", " + std::to_string(plan_.num_buckets()) + " reduction unit(s)";
  if (lane_buckets_ > 0) s += ", the lowest " + std::to_string(lane_buckets_) + " on a lane of their own";
  if (staging_) s += ", gradients by " + staging_->describe();
  return s;
}

// ---- main thread ----

template <typename Dtype>
void GradientReducer<Dtype>::SubmitAfter(int layer, Dtype rate, int iter) {
  for (int b : plan_.buckets_after(layer)) Submit(b, rate, iter);
}

template <typename Dtype>
void GradientReducer<Dtype>::SubmitAll(Dtype rate, int iter) {
  for (int L = net_->num_layers() - 1; L >= 0; --L) SubmitAfter(L, rate, iter);
}

template <typename Dtype>
void GradientReducer<Dtype>::Submit(int bucket, Dtype rate, int iter) {
  const BucketPlan::Bucket& b = plan_.bucket(bucket);
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
  if (staging_) staging_->Stage(bucket);
  // One task per chunk of a single gradient; a packed bucket is one task (it is at most fusion_elems).
  for (const ElementRange& c : plan_.chunks(bucket)) {
    Task t;
    t.bucket = bucket;
    t.offset = c.offset;
    t.count = c.count;
    t.rate = rate;
    t.iter = iter;
    Enqueue(ThreadFor(bucket), std::move(t));
  }
}

template <typename Dtype>
int GradientReducer<Dtype>::ThreadFor(int bucket) {
  if (inline_) return -1;
  if (in_lane_[static_cast<size_t>(bucket)]) return 0;
  const uint64_t T = static_cast<uint64_t>(threads());
  if (lane_buckets_ == 0) return static_cast<int>(next_chunk_++ % T);
  return 1 + static_cast<int>(next_chunk_++ % (T - 1));
}

template <typename Dtype>
void GradientReducer<Dtype>::Post(std::function<void(Allreduce&)> task) {
  Task t;
  t.post = std::move(task);
  Enqueue(inline_ ? -1 : 0, std::move(t));
}

template <typename Dtype>
void GradientReducer<Dtype>::Enqueue(int thread, Task t) {
  if (thread < 0) {
    Run(*inline_, t);
    return;
  }
  Worker& w = *workers_[static_cast<size_t>(thread)];
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.queue.push_back(std::move(t));
  }
  w.cv.notify_one();
}

template <typename Dtype>
double GradientReducer<Dtype>::WaitForLayer(int layer) {
  const auto& reads = plan_.reads(layer);
  if (reads.empty()) return 0;
  std::unique_lock<std::mutex> lock(state_mutex_);
  auto ready = [&] {
    for (int p : reads)
      if (param_pending_[p]) return false;
    return true;
  };
  if (ready()) return 0;
  const double t0 = timeline_->now_us();
  state_cv_.wait(lock, ready);
  lock.unlock();
  if (timeline_->enabled()) timeline_->Record("wait " + net_->layer_names()[layer], "wait", 0, t0);
  return timeline_->now_us() - t0;
}

template <typename Dtype>
void GradientReducer<Dtype>::WaitReduced() {
  std::unique_lock<std::mutex> lock(state_mutex_);
  state_cv_.wait(lock, [this] { return unreduced_params_ == 0; });
}

template <typename Dtype>
void GradientReducer<Dtype>::MarkUpdated() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  CHECK_EQ(unreduced_params_, 0) << "MarkUpdated before every gradient was summed";
  last_update_us_ = timeline_->now_us();
  std::fill(param_pending_.begin(), param_pending_.end(), 0);
  pending_params_ = 0;
  unit_remaining_ = plan_.unit_totals();
}

template <typename Dtype>
void GradientReducer<Dtype>::WaitUpdated() {
  std::unique_lock<std::mutex> lock(state_mutex_);
  state_cv_.wait(lock, [this] { return pending_params_ == 0; });
}

template <typename Dtype>
double GradientReducer<Dtype>::TakeBusyUs() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  const double busy = busy_us_;
  busy_us_ = 0;
  return busy;
}

template <typename Dtype>
double GradientReducer<Dtype>::last_update_us() {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return last_update_us_;
}

// ---- communication threads ----

template <typename Dtype>
void GradientReducer<Dtype>::WorkerLoop(Worker& w) {
  // Waiting for the other ranks, this thread sleeps between polls instead of taking turns with the
  // computation on its core (comm_param.poll_sleep_us; 0: MPI's own polling waits).
  comm_detail::set_thread_poll_sleep_us(poll_sleep_us_);
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
      t = std::move(w.queue.front());
      w.queue.pop_front();
    }
    Run(w, t);
  }
}

template <typename Dtype>
void GradientReducer<Dtype>::Run(Worker& w, const Task& t) {
  if (t.post) {
    t.post(*w.allreduce);
  } else {
    Reduce(w, t);
  }
}

// Sums one chunk over the ranks and, with one-pass updates, applies it at once.
template <typename Dtype>
void GradientReducer<Dtype>::Reduce(Worker& w, const Task& t) {
  const double t0 = timeline_->now_us();
  const BucketPlan::Bucket& b = plan_.bucket(t.bucket);
  const auto& params = net_->learnable_params();
  MaybeInjectFault(FaultPoint::kAllreduce, t.iter);
  auto diff = [&](int p) { return as_is_ ? params[p]->mutable_cpu_diff_as_is() : params[p]->mutable_cpu_diff(); };
  if (staging_) {
    // GPU training: summed in host staging (or by NCCL), and back on the device when this returns.
    staging_->Reduce(t.bucket, t.offset, t.count, *w.allreduce);
  } else if (!b.packed()) {
    // As is, the gradient is in its layer's CustomFormat (aligned in Submit), which every rank arranges alike.
    Dtype* g = diff(b.params[0]) + t.offset;
    if (ranks_ > 1) w.allreduce->run(g, t.count);
  } else {
    Dtype* packed = packed_[static_cast<size_t>(t.bucket)].data();
    size_t at = 0;
    for (int p : b.params) {
      std::memcpy(packed + at, diff(p), sizeof(Dtype) * params[p]->count());
      at += params[p]->count();
    }
    if (ranks_ > 1) w.allreduce->run(packed, b.elements);
    at = 0;
    for (int p : b.params) {
      std::memcpy(diff(p), packed + at, sizeof(Dtype) * params[p]->count());
      at += params[p]->count();
    }
  }
  const std::string name =
      timeline_->enabled() ? net_->param_display_names()[b.params[0]] + (b.packed() ? " (packed)" : "") : "";
  timeline_->Record(name, "allreduce", first_row_ + w.index, t0);
  const double t1 = timeline_->now_us();
  if (one_pass_updates_) {
    const Dtype scale = optimizer_->gradient_scale();
    if (!b.packed()) {
      optimizer_->UpdateSlice(b.params[0], t.offset, t.offset + t.count, t.rate, t.iter, scale);
    } else {
      for (int p : b.params) {
        optimizer_->UpdateSlice(p, 0, static_cast<size_t>(params[p]->count()), t.rate, t.iter, scale);
      }
    }
    timeline_->Record(name, "update", first_row_ + w.index, t1);
  }
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    busy_us_ += t1 - t0;
  }
  ChunkReduced(t);
}

template <typename Dtype>
void GradientReducer<Dtype>::ChunkReduced(const Task& t) {
  const BucketPlan::Bucket& b = plan_.bucket(t.bucket);
  std::vector<int> finished_layers;
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    for (int p : b.params) {
      const size_t done = b.packed() ? param_remaining_[p] : t.count;
      param_remaining_[p] -= done;
      if (param_remaining_[p] != 0) continue;
      --unreduced_params_;
      const int u = plan_.unit_of(p);
      if (--unit_remaining_[u] == 0) finished_layers.push_back(u);
    }
    if (unreduced_params_ == 0) state_cv_.notify_all();  // WaitReduced
    if (!update_layers_) return;                         // the caller updates with the whole gradient
  }
  for (int layer : finished_layers) FinishLayer(layer, t.rate, t.iter);
}

// The last chunk of `layer`'s gradients is summed: update the layer (unless every chunk already was) and let its
// next forward go.
template <typename Dtype>
void GradientReducer<Dtype>::FinishLayer(int layer, Dtype rate, int iter) {
  const double t0 = timeline_->now_us();
  const std::vector<int>& params = plan_.unit_params(layer);
  if (!one_pass_updates_) {  // one-pass updates already zeroed the gradients
    optimizer_->UpdateLayer(layer, rate, iter);
    for (int p : params) net_->learnable_params()[p]->clear_diff();
    timeline_->Record(net_->layer_names()[layer], "update", first_row_ + threads(), t0);
  }
  std::lock_guard<std::mutex> lock(state_mutex_);
  for (int p : params) {
    param_pending_[p] = 0;
    --pending_params_;
  }
  unit_remaining_[layer] = static_cast<int>(params.size());
  last_update_us_ = timeline_->now_us();
  state_cv_.notify_all();
}

STRATA_INSTANTIATE_CLASS(GradientReducer);

}  // namespace strata
