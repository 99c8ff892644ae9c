#include "strata/engine/pipeline_engine.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "strata/common.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

// Message tags on the engine's point-to-point communicator. Between two ranks, messages of one tag arrive in the
// order they were sent, which is the order both sides process micro-batches in.
constexpr int kForwardTag = 1;       // a micro-batch's boundary activations, stage s -> s + 1
constexpr int kBackwardTag = 2;      // their gradients, s + 1 -> s
constexpr int kBackwardDataTag = 3;  // the activations themselves, back to a Reversible stage s, s + 1 -> s
constexpr int kTestTag = 4;          // a test batch's boundary activations

}  // namespace

template <typename Dtype>
PipelineEngine<Dtype>::PipelineEngine(Net<Dtype>* net, const std::vector<Net<Dtype>*>& test_nets,
                                      Optimizer<Dtype>* optimizer, const Communicator& comm,
                                      const AllreducePolicy& policy, const PipelineStagePlan& plan,
                                      std::unique_ptr<Net<Dtype>> source, const DataParallelOptions& options)
    : optimizer_(optimizer),
      test_nets_(test_nets),
      display_(plan.param.display()),
      grid_(plan.grid),
      param_(plan.param.pipeline_param()),
      cut_(plan.cut),
      tests_(plan.tests),
      source_(std::move(source)),
      timeline_(!options.timeline_file.empty()),
      timeline_file_(options.timeline_file) {
  const int s = grid_.stage;
  k_ = plan.param.iter_size();
  const StageNets& nets = plan.nets;
  reversible_ = param_.reversible() && cut_.reversible(s);
  rebuilds_input_ = reversible_ && cut_.reversible_prefix(s) == 0;
  prev_reversible_ = s > 0 && param_.reversible() && cut_.reversible(s - 1);
  recompute_ = !reversible_ && param_.activations() == PipelineParameter::RECOMPUTE;
  inputs_ = cut_.inputs(s);
  send_names_ = nets.send_blobs;
  STRATA_REQUIRE(!grid_.first() || inputs_.empty() || source_)
      << "pipeline stage 0 receives " << inputs_.size() << " blob(s) but has no data layers to read them";

  // Micro-batches in flight between forward and backward: S - s in the steady state (fewer when k is smaller).
  const int in_flight = grid_.stages - s;
  const int copies = reversible_ || recompute_ ? 1
                     : param_.schedule() == PipelineParameter::SYNC ? std::min(in_flight, k_) : in_flight;
  nets_.push_back(net);
  for (int c = 1; c < copies; ++c) {
    auto copy = std::make_unique<Net<Dtype>>(nets.compute);
    // The same weights and the same gradients: every copy's backward adds into the one gradient.
    const auto& mine = nets_[0]->params();
    const auto& theirs = copy->params();
    for (size_t p = 0; p < mine.size(); ++p) {
      theirs[p]->ShareData(*mine[p]);
      theirs[p]->ShareDiff(*mine[p]);
    }
    nets_.push_back(copy.get());
    optimizer_->AddNetCopy(copy.get());  // K-FAC's factors come from every copy's backward
    copies_.push_back(std::move(copy));
  }
  for (Net<Dtype>* net : nets_) {
    std::vector<Blob<Dtype>*> in, out;
    for (const auto& b : inputs_) in.push_back(net->blob_by_name(b).get());
    for (const auto& b : send_names_) out.push_back(net->blob_by_name(b).get());
    in_blobs_.push_back(in);
    send_blobs_.push_back(out);
  }
  kept_.resize(static_cast<size_t>(in_flight));
  if (rebuilds_input_) {
    // The inputs the first block reads: dropped after each forward, so that its backward rebuilds them from the
    // output (a Reversible layer rebuilds a bottom the Net dropped, and reads one it kept).
    const Net<Dtype>& net = *nets_[0];
    for (int l = 0; l < net.num_layers(); ++l) {
      if (!net.layers()[static_cast<size_t>(l)]->RebuildsBottomsInBackward()) continue;
      for (Blob<Dtype>* b : net.bottom_vecs()[static_cast<size_t>(l)]) {
        if (std::find(in_blobs_[0].begin(), in_blobs_[0].end(), b) != in_blobs_[0].end()) dropped_inputs_.push_back(b);
      }
    }
  }
  if (reversible_) {
    // The stem: the layers before the first block, which run again from the kept input before backward.
    const auto& layers = nets_[0]->layers();
    stem_end_ = 0;
    auto is_block = [&](int l) { return layers[static_cast<size_t>(l)]->RebuildsBottomsInBackward(); };
    while (stem_end_ + 1 < static_cast<int>(layers.size()) && !is_block(stem_end_ + 1)) ++stem_end_;
    blocks_input_ = nets_[0]->bottom_vecs()[static_cast<size_t>(stem_end_) + 1][0];
    if (param_.schedule() == PipelineParameter::ASYNC) {
      // ASYNC measures the reconstruction of the first block's input once per iteration: kept as the forward
      // makes it (a stem stage's after the stem's forward), compared with what the block rebuilds.
      nets_[0]->add_after_forward_hook([this](int layer) {
        if (layer == stem_end_ && probing_ >= 0 && !rebuilds_input_) Keep(&probe_, probing_, {blocks_input_});
      }, this);
      nets_[0]->add_after_backward_hook([this](int layer) {
        if (layer == stem_end_ + 1 && probe_.mb == backward_mb_) MeasureReconstruction();
      }, this);
    }
  }

  link_ = std::make_unique<StageLink<Dtype>>(comm.world(), s, &stats_, &timeline_);
  STRATA_MPI_CHECK(MPI_Comm_split(comm.world(), s, grid_.replica, &stage_comm_));
  stage_allreduce_ = policy.create(stage_comm_);
  world_allreduce_ = policy.create(comm.world());
  world_collectives_ = std::make_unique<MpiCollectives>(comm.world(), world_allreduce_.get());
  if (grid_.replicas > 1) stage_collectives_ = std::make_unique<MpiCollectives>(stage_comm_, stage_allreduce_.get());
  if (grid_.stages > 1) {
    // One replica's stages: the parts of one model, for the optimizer's whole-gradient norm and finiteness.
    STRATA_MPI_CHECK(MPI_Comm_split(comm.world(), grid_.replica, s, &parts_comm_));
    parts_allreduce_ = policy.create(parts_comm_);
    parts_collectives_ = std::make_unique<MpiCollectives>(parts_comm_, parts_allreduce_.get());
  }
  if (grid_.replicas > 1) {
    // Without MPI_THREAD_MULTIPLE this thread, which sends and receives too, sums everything after the last backward.
    const bool threads = comm.thread_level() >= MPI_THREAD_MULTIPLE;
    ReducerSetup<Dtype> r;
    r.net = nets_[0];
    r.optimizer = optimizer_;
    r.group = stage_comm_;
    r.run_inline = !threads;
    for (int k = 0; k < (threads ? options.threads : 1); ++k) {
      reducer_comms_.push_back(MPI_COMM_NULL);
      STRATA_MPI_CHECK(MPI_Comm_dup(stage_comm_, &reducer_comms_.back()));
      r.allreduces.push_back(policy.create(reducer_comms_.back()));
    }
    r.fusion_elems = options.fusion_bytes / sizeof(Dtype);
    r.chunk_elems = options.chunk_bytes / sizeof(Dtype);
    r.low_layer_lane = options.low_layer_lane;
    r.update_layers = false;     // the schedule decides when the update runs: after the last micro-batch
    r.gradients_as_is = false;   // the replicas never agreed on layouts: sum plain gradients
    r.poll_sleep_us = options.poll_sleep_us;
    r.timeline = &timeline_;
    reducer_ = std::make_unique<GradientReducer<Dtype>>(std::move(r));
    if (threads) {
      for (Net<Dtype>* net : nets_) {
        net->add_after_backward_hook([this](int layer) {
          if (last_backward_) reducer_->SubmitAfter(layer, 0, iter_);
        }, this);
      }
    }
  }
  timeline_.NameRow(0, "stage " + std::to_string(s));
  timeline_.NameRow(1, "replicas' allreduce");
  // The whole net built for planning is gone: from here on the peaks are the stage's own.
  MemoryTracker::reset_all_peaks();
}

template <typename Dtype>
PipelineEngine<Dtype>::~PipelineEngine() {
  for (Net<Dtype>* net : nets_) net->RemoveHooks(this);
  for (const auto& copy : copies_) optimizer_->RemoveNetCopy(copy.get());
  reducer_.reset();  // its threads first: they record into timeline_ and run on reducer_comms_
  for (MPI_Comm& c : reducer_comms_) MPI_Comm_free(&c);
  link_.reset();  // waits for the sends in flight
  stage_collectives_.reset();
  stage_allreduce_.reset();
  if (stage_comm_ != MPI_COMM_NULL) MPI_Comm_free(&stage_comm_);
  parts_collectives_.reset();
  parts_allreduce_.reset();
  if (parts_comm_ != MPI_COMM_NULL) MPI_Comm_free(&parts_comm_);
}

template <typename Dtype>
double PipelineEngine<Dtype>::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename Dtype>
void PipelineEngine<Dtype>::Keep(Kept* kept, long mb, const std::vector<Blob<Dtype>*>& inputs, Net<Dtype>* net) {
  kept->mb = mb;
  const auto copy = [](const std::vector<Blob<Dtype>*>& from, std::vector<std::unique_ptr<Blob<Dtype>>>* to) {
    to->resize(from.size());
    for (size_t i = 0; i < from.size(); ++i) {
      if (!(*to)[i]) {
        (*to)[i] = std::make_unique<Blob<Dtype>>();
        (*to)[i]->set_memory_category(MemoryCategory::kActivation);
      }
      (*to)[i]->Reshape(from[i]->shape());
      (*to)[i]->CopyFrom(*from[i]);
    }
  };
  copy(inputs, &kept->inputs);
  kept->rng = Strata::rng();
  std::vector<Blob<Dtype>*> carried;
  if (net) {
    for (const auto& layer : net->layers()) {
      for (Blob<Dtype>* b : layer->carried_state().next) carried.push_back(b);
    }
  }
  copy(carried, &kept->carried);
}

template <typename Dtype>
void PipelineEngine<Dtype>::HandOnCarriedState(Net<Dtype>& from, Net<Dtype>& to) {
  for (size_t l = 0; l < from.layers().size(); ++l) {
    const std::vector<Blob<Dtype>*> mine = from.layers()[l]->carried_state().next;
    const std::vector<Blob<Dtype>*> theirs = to.layers()[l]->carried_state().next;
    for (size_t i = 0; i < mine.size(); ++i) theirs[i]->CopyFrom(*mine[i]);
  }
}

template <typename Dtype>
typename PipelineEngine<Dtype>::Kept* PipelineEngine<Dtype>::KeptFor(long mb) {
  return &kept_[static_cast<size_t>(mb) % kept_.size()];
}

template <typename Dtype>
void PipelineEngine<Dtype>::Forward(long mb, Dtype* loss) {
  const size_t c = CopyFor(mb);
  Net<Dtype>& net = *nets_[c];
  const std::vector<Blob<Dtype>*>& in = in_blobs_[c];
  if (grid_.first()) {
    if (source_) {
      const double t0 = now_ms();
      source_->Forward();
      for (size_t i = 0; i < in.size(); ++i) {
        const Blob<Dtype>& b = *source_->blob_by_name(inputs_[i]);
        std::copy(b.cpu_data(), b.cpu_data() + b.count(), in[i]->mutable_cpu_data());
      }
      stats_.compute_ms += now_ms() - t0;
    }
  } else {
    const int from = grid_.RankOf(grid_.stage - 1, grid_.replica);
    for (Blob<Dtype>* b : in) link_->Receive(b, false, from, kForwardTag);
  }
  // Kept: what a replay starts from, and what a Reversible stage before this one gets back with the gradient.
  const bool keep_inputs = recompute_ || (reversible_ && !rebuilds_input_) || (prev_reversible_ && !rebuilds_input_);
  // A layer that carries state from forward to forward (an LSTM) goes on from the micro-batch before this one,
  // which may have run on another copy of the net.
  if (last_forward_copy_ >= 0 && last_forward_copy_ != static_cast<int>(c)) {
    HandOnCarriedState(*nets_[static_cast<size_t>(last_forward_copy_)], net);
  }
  last_forward_copy_ = static_cast<int>(c);
  if (keep_inputs) Keep(KeptFor(mb), mb, in, &net);
  const bool probe = reversible_ && param_.schedule() == PipelineParameter::ASYNC && probe_.mb < 0;
  if (probe && rebuilds_input_) Keep(&probe_, mb, {blocks_input_});
  probing_ = probe ? mb : -1;  // a stem stage keeps the first block's input when its forward has it (hook below)
  const double t0 = now_ms(), ts = timeline_.now_us();
  Dtype l = 0;
  net.Forward(&l);
  probing_ = -1;
  if (loss) *loss += l;
  last_forward_mb_ = mb;
  stats_.compute_ms += now_ms() - t0;
  timeline_.Record("F" + std::to_string(mb), "forward", 0, ts);
  if (!grid_.last()) {
    const int to = grid_.RankOf(grid_.stage + 1, grid_.replica);
    for (Blob<Dtype>* b : send_blobs_[c]) link_->Send(b, false, to, kForwardTag);
  }
  for (Blob<Dtype>* b : dropped_inputs_) b->release_memory();
}

template <typename Dtype>
void PipelineEngine<Dtype>::Replay(Net<Dtype>& net, const Kept& kept, int end) {
  const std::vector<Blob<Dtype>*>& in = in_blobs_[0];
  for (size_t i = 0; i < in.size(); ++i) in[i]->CopyFrom(*kept.inputs[i]);
  // The carried state (an LSTM's) back to where this micro-batch's forward started; the replay leaves the state
  // the next forward starts from alone, as it leaves the running statistics and the random engine.
  size_t k = 0;
  for (const auto& layer : net.layers()) {
    for (Blob<Dtype>* b : layer->carried_state().start) b->CopyFrom(*kept.carried[k++]);
  }
  ReplayForward<Dtype>(net.layers(), kept.rng, [&] { net.ForwardFromTo(0, end); });
  last_forward_mb_ = kept.mb;
}

template <typename Dtype>
void PipelineEngine<Dtype>::Backward(long mb) {
  const size_t c = CopyFor(mb);
  Net<Dtype>& net = *nets_[c];
  Kept* kept = KeptFor(mb);
  if ((recompute_ || (reversible_ && !rebuilds_input_)) && last_forward_mb_ != mb) {
    CHECK_EQ(kept->mb, mb) << "the inputs of micro-batch " << mb << " were not kept";
    const double t0 = now_ms(), ts = timeline_.now_us();
    // RECOMPUTE: the whole stage; a Reversible stage: its stem (the blocks rebuild themselves from the output).
    Replay(net, *kept, recompute_ ? net.num_layers() - 1 : stem_end_);
    stats_.compute_ms += now_ms() - t0;
    timeline_.Record("R" + std::to_string(mb), "replay", 0, ts);
  }
  if (!grid_.last()) {
    const int from = grid_.RankOf(grid_.stage + 1, grid_.replica);
    for (Blob<Dtype>* b : send_blobs_[c]) link_->Receive(b, true, from, kBackwardTag);
    if (reversible_) {
      for (Blob<Dtype>* b : send_blobs_[c]) link_->Receive(b, false, from, kBackwardDataTag);
    }
  }
  // The probed micro-batch of a stem stage: its first block rebuilds its input too (rather than read the stem's
  // replay), so that the hook after that block's backward can compare it with the forward's.
  backward_mb_ = mb;
  if (probe_.mb == mb && !rebuilds_input_) blocks_input_->release_memory();
  const double t0 = now_ms(), ts = timeline_.now_us();
  net.Backward();
  stats_.compute_ms += now_ms() - t0;
  timeline_.Record("B" + std::to_string(mb), "backward", 0, ts);
  const std::vector<Blob<Dtype>*>& in = in_blobs_[c];
  if (!grid_.first()) {
    const int to = grid_.RankOf(grid_.stage - 1, grid_.replica);
    for (Blob<Dtype>* b : in) link_->Send(b, true, to, kBackwardTag);
    if (prev_reversible_) {
      if (rebuilds_input_) {
        for (Blob<Dtype>* b : in) link_->Send(b, false, to, kBackwardDataTag);
      } else {
        CHECK_EQ(kept->mb, mb) << "the inputs of micro-batch " << mb << " were not kept";
        for (const auto& b : kept->inputs) link_->Send(b.get(), false, to, kBackwardDataTag);
      }
    }
  }
  // The rebuilt input is sent: gone again, so that the next backward rebuilds its own.
  for (Blob<Dtype>* b : dropped_inputs_) b->release_memory();
}

template <typename Dtype>
void PipelineEngine<Dtype>::MeasureReconstruction() {
  // How far the rebuilt input is from the one the forward had (the weights changed in between: ASYNC).
  const Dtype* x = blocks_input_->cpu_data();
  const Dtype* was = probe_.inputs[0]->cpu_data();
  double err = 0, scale = 0;
  for (int j = 0; j < blocks_input_->count(); ++j) {
    err = std::max(err, std::fabs(static_cast<double>(x[j] - was[j])));
    scale = std::max(scale, std::fabs(static_cast<double>(was[j])));
  }
  stats_.max_reconstruction_error = std::max(stats_.max_reconstruction_error, scale > 0 ? err / scale : err);
  probe_.mb = -1;
}

template <typename Dtype>
Dtype PipelineEngine<Dtype>::RunSync() {
  Dtype loss = 0;
  Dtype* l = grid_.last() ? &loss : nullptr;
  const int fill = std::min(grid_.stages - grid_.stage - 1, k_);
  int f = 0, b = 0;
  while (f < fill) Forward(f++, l);
  while (f < k_) {
    Forward(f++, l);
    if (b == k_ - 1) BeginLastBackward();
    Backward(b++);
  }
  while (b < k_) {
    if (b == k_ - 1) BeginLastBackward();
    Backward(b++);
  }
  link_->WaitSends();
  return loss;
}

template <typename Dtype>
Dtype PipelineEngine<Dtype>::RunAsync() {
  Dtype loss = 0;
  Dtype* l = grid_.last() ? &loss : nullptr;
  if (!primed_) {
    for (int i = 0; i < grid_.stages - grid_.stage - 1; ++i) Forward(forwards_++, nullptr);
    primed_ = true;
  }
  const long target = backwards_ + k_;
  while (backwards_ < target) {
    Forward(forwards_++, l);
    if (backwards_ == target - 1) BeginLastBackward();
    Backward(backwards_++);
  }
  return loss;
}

template <typename Dtype>
void PipelineEngine<Dtype>::BeginLastBackward() {
  if (reducer_ && reducer_->threads() > 0) last_backward_ = true;
}

template <typename Dtype>
void PipelineEngine<Dtype>::FinishReduction() {
  if (!reducer_) return;
  const double t0 = now_ms(), ts = timeline_.now_us();
  if (reducer_->threads() == 0) reducer_->SubmitAll(0, iter_);  // on this thread, now
  reducer_->WaitReduced();  // every layer's gradient was submitted by its last backward
  last_backward_ = false;
  stats_.reduce_ms += now_ms() - t0;
  timeline_.Record("allreduce wait", "reduce", 0, ts);
}

template <typename Dtype>
Dtype PipelineEngine<Dtype>::Iterate(Dtype rate, int iter) {
  const double start = now_ms();
  Net<Dtype>& net = *nets_[0];
  iter_ = iter;
  optimizer_->BeginIteration(iter);
  const bool sync = param_.schedule() == PipelineParameter::SYNC;
  if (sync && !optimizer_->gradients_zeroed()) net.ClearParamDiffs();
  const Dtype loss = (sync ? RunSync() : RunAsync()) / static_cast<Dtype>(k_);
  if (grid_.last()) RequireFiniteLoss(loss, iter);
  FinishReduction();
  optimizer_->Apply(rate, iter);
  if (reducer_) reducer_->MarkUpdated();
  // ASYNC: the backwards a Drain runs before the next update add to a gradient that starts at zero.
  if (!sync && !optimizer_->gradients_zeroed()) net.ClearParamDiffs();
  ++stats_.iterations;
  stats_.iteration_ms += now_ms() - start;
  return loss;
}

template <typename Dtype>
void PipelineEngine<Dtype>::Drain() {
  if (param_.schedule() == PipelineParameter::ASYNC && primed_) {
    // Stage 0 is S - 1 forwards ahead of the backwards every stage has done, stage s S - s - 1. Each catches up
    // with stage 0 in the steady state's order (s times a forward and a backward, then the backwards left), so that
    // no stage holds more micro-batches in flight than it has room for.
    const long target = backwards_ + grid_.stages - 1;
    while (forwards_ < target) {
      Forward(forwards_++, nullptr);
      Backward(backwards_++);
    }
    while (backwards_ < forwards_) Backward(backwards_++);
    primed_ = false;
  }
  link_->WaitSends();
  if (grid_.replicas > 1) {
    // The statistics each replica moved on its own data: their mean.
    Net<Dtype>& net = *nets_[0];
    const auto& params = net.learnable_params();
    for (size_t p = 0; p < params.size(); ++p) {
      if (!net.learnable_param_is_statistic(static_cast<int>(p))) continue;
      stage_allreduce_->run(params[p]->mutable_cpu_data(), static_cast<size_t>(params[p]->count()));
      params[p]->scale_data(Dtype(1) / static_cast<Dtype>(grid_.replicas));
    }
  }
}

template <typename Dtype>
SignalAction PipelineEngine<Dtype>::AgreeOnAction(SignalAction local, int iter) {
  (void)iter;
  int a = static_cast<int>(local);
  STRATA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &a, 1, MPI_INT, MPI_MAX, link_->comm()));
  return static_cast<SignalAction>(a);
}

template <typename Dtype>
void PipelineEngine<Dtype>::ReduceScores(std::vector<Dtype>* scores) {
  // Only the last stage computes scores; its replicas saw different data.
  if (grid_.replicas == 1 || scores->empty()) return;
  stage_allreduce_->run(scores->data(), scores->size());
  for (Dtype& s : *scores) s /= static_cast<Dtype>(grid_.replicas);
}

template <typename Dtype>
void PipelineEngine<Dtype>::TrainForward(Net<Dtype>& net, Dtype* loss) {
  (void)net;
  Drain();
  if (loss) *loss = 0;
  Forward(0, grid_.last() ? loss : nullptr);
  link_->WaitSends();
  last_forward_mb_ = -1;  // its activations belong to no micro-batch of an iteration
}

template <typename Dtype>
const std::vector<Blob<Dtype>*>& PipelineEngine<Dtype>::TestForward(Net<Dtype>& net, Dtype* loss) {
  size_t t = 0;
  while (t < test_nets_.size() && test_nets_[t] != &net) ++t;
  CHECK_LT(t, tests_.size()) << "TestForward: not one of the stage's test nets";
  const TestStage& test = tests_[t];
  if (!grid_.first()) {
    const int from = grid_.RankOf(grid_.stage - 1, grid_.replica);
    for (const std::string& b : test.cut.inputs(grid_.stage)) {
      link_->Receive(net.blob_by_name(b).get(), false, from, kTestTag);
    }
  }
  const auto& outputs = net.Forward(loss);
  if (grid_.last()) return outputs;
  const int to = grid_.RankOf(grid_.stage + 1, grid_.replica);
  for (const std::string& b : test.send_blobs) link_->Send(net.blob_by_name(b).get(), false, to, kTestTag);
  link_->WaitSends();
  if (loss) *loss = 0;
  return no_outputs_;
}

template <typename Dtype>
bool PipelineEngine<Dtype>::GatherWeights(NetParameter* weights, bool write_diff) {
  std::string mine;
  if (grid_.replica == 0) {
    NetParameter stage;
    nets_[0]->ToProto(&stage, write_diff);
    stage.SerializeToString(&mine);
  }
  const std::vector<std::string> all = world_collectives_->GatherToRoot(mine);
  if (world_collectives_->rank() != 0) return true;
  std::map<std::string, LayerParameter> layers;
  for (const std::string& s : all) {
    NetParameter stage;
    if (s.empty()) continue;
    STRATA_REQUIRE(stage.ParseFromString(s)) << "pipeline snapshot: a stage's weights did not parse";
    for (const auto& l : stage.layer()) layers[l.name()] = l;
  }
  weights->Clear();
  weights->set_name(nets_[0]->name().substr(0, nets_[0]->name().rfind(".stage")));
  for (const LayerParameter& l : cut_.layers) {
    auto it = layers.find(l.name());
    *weights->add_layer() = it != layers.end() ? it->second : l;
  }
  return true;
}

template <typename Dtype>
std::vector<int> PipelineEngine<Dtype>::stage_of_ranks() const {
  std::vector<int> stage_of(static_cast<size_t>(grid_.stages * grid_.replicas));
  for (int s = 0; s < grid_.stages; ++s) {
    for (int r = 0; r < grid_.replicas; ++r) stage_of[static_cast<size_t>(grid_.RankOf(s, r))] = s;
  }
  return stage_of;
}

template <typename Dtype>
std::vector<Layer<Dtype>*> PipelineEngine<Dtype>::record_stream_layers() {
  std::vector<Layer<Dtype>*> layers;
  if (!source_) return layers;
  for (const auto& layer : source_->layers()) {
    if (layer->has_record_stream()) layers.push_back(layer.get());
  }
  return layers;
}

template <typename Dtype>
void PipelineEngine<Dtype>::ResetStats() {
  stats_ = PipelineStats();
  MemoryTracker::reset_all_peaks();
}

template <typename Dtype>
std::vector<PipelineStats> PipelineEngine<Dtype>::GatherStats() const {
  return GatherPipelineStats(stats_, grid_, *world_collectives_);
}

template <typename Dtype>
void PipelineEngine<Dtype>::AfterIteration(int iterations_done) {
  if (display_ <= 0 || iterations_done % display_ != 0) return;
  const std::vector<PipelineStats> all = GatherStats();
  if (!all.empty()) LOG(INFO) << "Pipeline stages (since the start):\n" << PipelineStatsTable(all);
}

template <typename Dtype>
void PipelineEngine<Dtype>::Finish(int iterations_done) {
  (void)iterations_done;
  Drain();
  const std::vector<PipelineStats> all = GatherStats();
  if (!all.empty()) LOG(INFO) << "Pipeline stages:\n" << PipelineStatsTable(all);
  if (timeline_.enabled()) timeline_.Write(timeline_file_, world_collectives_.get());
}

STRATA_INSTANTIATE_CLASS(PipelineEngine);

}  // namespace strata
