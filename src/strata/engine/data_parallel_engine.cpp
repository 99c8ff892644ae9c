#include "strata/engine/data_parallel_engine.hpp"

#include <algorithm>
#include <cstdio>

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
  o.low_layer_lane = p.low_layer_lane();
  STRATA_REQUIRE(o.chunk_bytes >= 64) << "comm_param.chunk_bytes must be at least 64, got " << o.chunk_bytes;
  STRATA_REQUIRE(o.threads >= 1 && o.threads <= 16) << "comm_param.threads must be in [1, 16], got " << o.threads;
  STRATA_REQUIRE(!o.low_layer_lane || o.threads >= 2)
      << "comm_param.low_layer_lane needs comm_param.threads of at least 2 (a lane and a thread for the rest), got "
      << o.threads;
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
      signals_(comm.size()),
      timeline_(!options.timeline_file.empty()) {
  const int threads = std::min(options_.threads, comm.num_comm_threads());
  STRATA_REQUIRE(threads >= 1) << "data-parallel training needs at least one communication thread";
  // Clipping and K-FAC need the whole reduced gradient: reduce every layer, then one Optimizer::Apply.
  whole_gradient_ = optimizer_->needs_whole_gradient();

  ReducerSetup<Dtype> r;
  r.net = net_;
  r.optimizer = optimizer_;
  r.group = comm.world();
  for (int k = 0; k < threads; ++k) r.allreduces.push_back(comm.watched(policy.create(comm.thread_comm(k))));
  r.fusion_elems = options.fusion_bytes / sizeof(Dtype);
  r.chunk_elems = options.chunk_bytes / sizeof(Dtype);
  r.low_layer_lane = options.low_layer_lane;
  r.update_layers = !whole_gradient_;
  r.gpu_path = options.gpu_path;
  r.stage_in_cpu_mode = options.stage_in_cpu_mode;
  r.poll_sleep_us = options.poll_sleep_us;
  r.timeline = &timeline_;
  reducer_ = std::make_unique<GradientReducer<Dtype>>(std::move(r));

  net_->ClearParamDiffs();
  BroadcastParams();
  AttachHooks();
  LOG_IF(INFO, comm.rank() == 0) << "Data-parallel training on " << ranks_ << " ranks ("
                                 << comm.topology().describe() << "): overlap " << (options_.overlap ? "on" : "off")
                                 << ", " << reducer_->describe() << ", allreduce " << policy.describe();
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
      stats_.tail_ms += std::max(0.0, reducer_->last_update_us() - backward_end_us_) / 1000;
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
  if (!options_.overlap) reducer_->SubmitAll(rate, iter);
  SignalAction request;
  if (signals_.TakeMessage(iter, &request)) {
    // On thread 0 on every rank, behind this iteration's gradients there.
    reducer_->Post([this, iter, request](Allreduce& a) { signals_.Reduce(iter, request, a); });
  }
  const double w0 = timeline_.now_us();
  if (whole_gradient_) {
    UpdateWholeGradient(rate, iter);
  } else if (!options_.overlap) {
    reducer_->WaitUpdated();
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
  const SignalAction action = local ? SignalAction::kStop : SignalAction::kNone;
  reducer_->Post([this, action](Allreduce& a) { signals_.ReduceStopQuery(action, a); });
  return signals_.WaitForStopQuery();
}

// Clipping and K-FAC: wait for every reduction, then the optimizer updates with the whole gradient here.
template <typename Dtype>
void DataParallelEngine<Dtype>::UpdateWholeGradient(Dtype rate, int iter) {
  reducer_->WaitReduced();
  optimizer_->Apply(rate, iter);
  if (!optimizer_->gradients_zeroed()) net_->ClearParamDiffs();
  reducer_->MarkUpdated();
}

template <typename Dtype>
void DataParallelEngine<Dtype>::OnBackward(int layer_id) {
  if (!options_.overlap || !last_pass_ || optimizer_->in_statistics_pass()) return;
  reducer_->SubmitAfter(layer_id, rate_, iter_);
}

template <typename Dtype>
void DataParallelEngine<Dtype>::WaitForLayer(int layer_id) {
  const double waited_ms = reducer_->WaitForLayer(layer_id) / 1000;
  stats_.wait_ms += waited_ms;
  stats_.forward_wait_ms += waited_ms;
}

// ---- between iterations ----

template <typename Dtype>
void DataParallelEngine<Dtype>::AverageStatistics() {
  for (int p : reducer_->plan().statistic_params()) {
    Blob<Dtype>* blob = net_->learnable_params()[p];
    collectives_.AllreduceMean(blob->mutable_cpu_data(), static_cast<size_t>(blob->count()));
  }
}

template <typename Dtype>
void DataParallelEngine<Dtype>::Drain() {
  reducer_->WaitUpdated();
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
    const CustomFormatPtr l = p->data_custom_layout();
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
  const double busy_us = reducer_->TakeBusyUs();
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
