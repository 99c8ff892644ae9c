#include "strata/solver.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "strata/device.hpp"
#include "strata/math_functions.hpp"
#include "strata/recompute/executor.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"
#include "strata/setting_checks.hpp"
#include "strata/util/fault_injection.hpp"
#include "strata/util/io.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata {

SolverParameter ReadSolverParam(const std::string& filename) {
  SolverParameter param;
  ReadSolverParamsFromTextFile(filename, &param);
  try {
    CheckSolverParam(param);  // the Solver checks again; here the message can name the file
  } catch (const Error& e) {
    throw Error(filename + ": " + e.what());
  }
  // Caffe's default snapshot_prefix: the solver file's name without its extension. A relative net path is relative
  // to the working directory, as in Caffe.
  if (!param.has_snapshot_prefix()) {
    std::string prefix = filename;
    const size_t dot = prefix.rfind('.');
    if (dot != std::string::npos && prefix.find('/', dot) == std::string::npos) prefix.resize(dot);
    param.set_snapshot_prefix(prefix);
  }
  return param;
}

float LearningRateAt(const SolverParameter& param, int iter, int* current_step) {
  const std::string& policy = param.lr_policy();
  const double base = param.base_lr();
  if (policy == "fixed") return static_cast<float>(base);
  if (policy == "step") {
    STRATA_REQUIRE(param.stepsize() > 0) << "lr_policy step needs stepsize > 0";
    *current_step = iter / param.stepsize();
    return static_cast<float>(base * std::pow(param.gamma(), *current_step));
  }
  if (policy == "exp") return static_cast<float>(base * std::pow(param.gamma(), iter));
  if (policy == "inv") {
    return static_cast<float>(base * std::pow(1.0 + param.gamma() * iter, -static_cast<double>(param.power())));
  }
  if (policy == "multistep") {
    while (*current_step < param.stepvalue_size() && iter >= param.stepvalue(*current_step)) ++*current_step;
    return static_cast<float>(base * std::pow(param.gamma(), *current_step));
  }
  if (policy == "poly") {
    STRATA_REQUIRE(param.max_iter() > 0) << "lr_policy poly needs max_iter > 0";
    return static_cast<float>(base * std::pow(1.0 - static_cast<double>(iter) / param.max_iter(), param.power()));
  }
  if (policy == "sigmoid") {
    return static_cast<float>(base / (1.0 + std::exp(-param.gamma() * (static_cast<double>(iter) - param.stepsize()))));
  }
  STRATA_FAIL() << "unknown lr_policy '" << policy << "' (known: fixed, step, exp, inv, multistep, poly, sigmoid)";
  return 0;
}

namespace {

// The solver's precision reaches a net that sets none (and through it, Net::Init, its layers that set none).
void InheritPrecision(const SolverParameter& param, NetParameter* net) {
  if (param.has_precision() && !net->has_precision()) net->set_precision(param.precision());
}

}  // namespace

NetParameter TrainNetParam(const SolverParameter& param) {
  NetParameter net_param;
  if (param.has_train_net_param()) {
    net_param = param.train_net_param();
  } else if (param.has_train_net()) {
    ReadNetParamsFromTextFile(param.train_net(), &net_param);
  } else if (param.has_net_param()) {
    net_param = param.net_param();
  } else {
    STRATA_REQUIRE(param.has_net()) << "the solver names no net (give net: \"FILE\")";
    ReadNetParamsFromTextFile(param.net(), &net_param);
  }
  // The state: TRAIN, plus whatever the net file and the solver's train_state say.
  NetState state;
  state.set_phase(TRAIN);
  state.MergeFrom(net_param.state());
  state.MergeFrom(param.train_state());
  state.set_phase(TRAIN);
  *net_param.mutable_state() = state;
  InheritPrecision(param, &net_param);
  return net_param;
}

std::vector<NetParameter> TestNetParams(const SolverParameter& param) {
  std::vector<NetParameter> sources;
  for (const auto& p : param.test_net_param()) sources.push_back(p);
  for (const auto& f : param.test_net()) {
    NetParameter p;
    ReadNetParamsFromTextFile(f, &p);
    sources.push_back(p);
  }
  // With a single `net`, every test_iter entry tests that net in TEST phase.
  const int generic = param.test_iter_size() - static_cast<int>(sources.size());
  if (generic > 0) {
    NetParameter p;
    if (param.has_net_param()) {
      p = param.net_param();
    } else if (param.has_net()) {
      ReadNetParamsFromTextFile(param.net(), &p);
    }
    if (p.layer_size() || p.layers_size()) {
      for (int i = 0; i < generic; ++i) sources.push_back(p);
    }
  }
  STRATA_REQUIRE(static_cast<int>(sources.size()) == param.test_iter_size())
      << "test_iter must be given once per test net (" << sources.size() << " test net(s), "
      << param.test_iter_size() << " test_iter)";
  STRATA_REQUIRE(param.test_state_size() == 0 || param.test_state_size() == static_cast<int>(sources.size()))
      << "test_state must be given once per test net, or not at all";
  for (size_t i = 0; i < sources.size(); ++i) {
    STRATA_REQUIRE(param.test_iter(static_cast<int>(i)) > 0) << "test_iter must be positive";
    NetState state;
    state.set_phase(TEST);
    state.MergeFrom(sources[i].state());
    if (param.test_state_size()) state.MergeFrom(param.test_state(static_cast<int>(i)));
    state.set_phase(TEST);
    *sources[i].mutable_state() = state;
    InheritPrecision(param, &sources[i]);
  }
  return sources;
}

template <typename Dtype>
Solver<Dtype>::Solver(const SolverParameter& param, const EngineSetup& setup) : param_(param) {
  CheckSolverParam(param_);
  OptimizerRegistry<Dtype>::TypeOf(param);  // an unknown solver type fails before any net is built
  EngineFactory<Dtype> engines(param, setup);  // refuses what the engine cannot run; a pipeline cuts the nets
  param_ = engines.net_param();
  if (!param_.has_lr_policy()) param_.set_lr_policy("fixed");
  int probe_step = 0;
  LearningRateAt(param_, 0, &probe_step);  // reject an unknown or incomplete policy now, not mid-run
  engines.BuildNets([this](const DataShard& shard) {
    if (param_.random_seed() >= 0) Strata::set_random_seed(static_cast<uint64_t>(param_.random_seed()));
    InitTrainNet(shard);
    InitTestNets(shard);
    return net_.get();
  });
  // Caffe's `weights` field: fine-tuning starts from these (after BuildNets, which gives a pipeline stage the whole
  // net's initial weights; a resume overwrites them).
  if (param_.weights_size() > 0) {
    LoadWeights(net_.get(), {param_.weights().begin(), param_.weights().end()}, "the solver's weights", false);
  }
  const auto& loss_weights = net_->blob_loss_weights();
  // A pipeline stage's net (docs/pipeline.md) may have neither: its gradient comes from the next stage.
  const bool pipeline_stage = param_.has_net_param() && param_.net_param().external_gradient_size() > 0;
  STRATA_REQUIRE(pipeline_stage || !net_->learnable_params().empty() ||
                 std::any_of(loss_weights.begin(), loss_weights.end(), [](Dtype w) { return w != 0; }))
      << "net '" << net_->name() << "' has nothing to train: no learnable parameters and no loss";
  // Caffe's meaning, kept so that its solvers load; but a test net that never runs deserves a word.
  if (!test_nets_.empty() && param_.test_interval() == 0) {
    LOG(WARNING) << "test_interval is 0: the " << test_nets_.size() << " test net(s) never run (set test_interval "
                 << "to test every that many iterations)";
  }
  // Caffe's rule, kept; but with iter_size it is not what one pass over the whole batch would clip.
  if (param_.clip_gradients() >= 0 && param_.iter_size() > 1) {
    LOG(WARNING) << "clip_gradients " << param_.clip_gradients() << " bounds the norm of the gradient summed over the "
                 << param_.iter_size() << " passes of iter_size (Caffe's rule), not of their mean: the training "
                 << "differs from one pass over the whole batch";
  }
  optimizer_ = OptimizerRegistry<Dtype>::Create(param_, net_.get());
  set_engine(engines.MakeEngine(net_.get(), test_nets_, optimizer_.get()));
}

// The engine goes first: its threads may still be updating the weights until it is destroyed.
template <typename Dtype>
Solver<Dtype>::~Solver() {
  engine_.reset();
}

template <typename Dtype>
TrainingEngine<Dtype>* Solver<Dtype>::set_engine(std::unique_ptr<TrainingEngine<Dtype>> engine) {
  engine_.reset();  // the old one stops its threads and detaches its hooks before the new one runs an iteration
  engine_ = engine ? std::move(engine)
                   : std::make_unique<LocalEngine<Dtype>>(net_.get(), optimizer_.get(), param_.iter_size());
  CheckGradientContributions(engine_->replicas(), param_.iter_size());
  optimizer_->set_replicas(engine_->replicas());
  optimizer_->set_collectives(engine_->replica_collectives());
  optimizer_->set_model_parts(engine_->model_parts());
  engine_->set_stop_poll([this] { return StopRequestedInIteration(); });
  return engine_.get();
}

template <typename Dtype>
void Solver<Dtype>::InitTrainNet(const DataShard& shard) {
  const NetParameter net_param = TrainNetParam(param_);
  net_ = std::make_shared<Net<Dtype>>(net_param, shard);
  // float16's gradients flush to zero below 2^-24: said once, since a net that trains in it without a scale may
  // still learn (PyTorch's autocast warns nothing; NVIDIA's recipes always scale).
  const bool fp16 = Strata::mode() == Strata::GPU && gpu_has_fp16() &&
                    std::any_of(net_->layers().begin(), net_->layers().end(),
                                [](const auto& l) { return l->layer_param().precision() == FP16; });
  LOG_IF(WARNING, fp16 && !param_.has_loss_scale())
      << "layers compute in float16 (precision: FP16) without a loss_scale: gradients below 2^-24 become zero and "
         "above 65504 infinite; add loss_scale { dynamic: true } to the solver (docs/caffe.md, \"Loss scaling\")";

  // recompute_param: train within an activation budget by recomputing (docs/recompute.md). Without one,
  // blob_lifetime FREE_AFTER_USE frees each blob after its last use, through the store-all plan's executor.
  const RecomputeParameter& rp = param_.recompute_param();
  if (param_.has_recompute_param() && rp.planner() != "store_all") {
    const RecomputeGraph g = ExtractGraph(*net_);
    const RecomputePlan plan = MakePlan(g, rp);
    InstallRecomputePlan(net_.get(), plan);
    LOG(INFO) << "Recompute plan " << plan.planner << ": " << plan.segments.size() << " segments, predicted peak "
              << "activation data " << human_bytes(static_cast<double>(plan.peak_bytes)) << " of "
              << human_bytes(static_cast<double>(g.total_bytes())) << ", recomputation "
              << plan.recompute_flops / 1e9 << " GFLOP per iteration";
  } else if (param_.blob_lifetime() == SolverParameter::FREE_AFTER_USE) {
    InstallRecomputePlan(net_.get(), StoreAllPlan(ExtractGraph(*net_)));
  }
}

template <typename Dtype>
void Solver<Dtype>::InitTestNets(const DataShard& shard) {
  const std::vector<NetParameter> sources = TestNetParams(param_);
  for (size_t i = 0; i < sources.size(); ++i) {
    auto test_net = std::make_shared<Net<Dtype>>(sources[i], shard);
    test_net->ShareTrainedLayersWith(net_.get());
    // A test net runs no backward: every value but its outputs goes after its last reader.
    if (param_.blob_lifetime() == SolverParameter::FREE_AFTER_USE) {
      InstallRecomputePlan(test_net.get(), StoreAllPlan(ExtractGraph(*test_net)));
    }
    test_nets_.push_back(test_net);
  }
}

template <typename Dtype>
Dtype Solver<Dtype>::GetLearningRate() {
  return static_cast<Dtype>(LearningRateAt(param_, iter_, &current_step_));
}

template <typename Dtype>
bool Solver<Dtype>::StopRequestedInIteration() {
  if (!action_) return false;
  const SignalAction a = action_();
  // A stop outranks a snapshot; either waits for Step.
  if (a == SignalAction::kStop || (a == SignalAction::kSnapshot && pending_action_ == SignalAction::kNone)) {
    pending_action_ = a;
  }
  return pending_action_ == SignalAction::kStop;
}

template <typename Dtype>
void Solver<Dtype>::Solve(const std::string& resume_file) {
  LOG(INFO) << "Solving " << net_->name();
  LOG(INFO) << "Learning Rate Policy: " << param_.lr_policy();
  // Snapshots go where the rank that writes them can write, in a format that holds the net, on a prefix no other
  // run uses: checked now, not at the first snapshot hours in.
  if (param_.snapshot() > 0 || param_.snapshot_after_train()) {
    std::vector<std::pair<std::string, uint64_t>> layer_bytes;  // with their gradients under snapshot_diff
    for (int i = 0; i < net_->num_layers(); ++i) {
      uint64_t bytes = 0;
      for (const auto& blob : net_->layers()[i]->blobs()) bytes += sizeof(Dtype) * static_cast<uint64_t>(blob->count());
      layer_bytes.emplace_back(net_->layer_names()[i], param_.snapshot_diff() ? 2 * bytes : bytes);
    }
    RequireSnapshotFits(layer_bytes, param_.snapshot_format());
    if (Strata::root_solver()) {
      RequireWritableLocation(SnapshotFilename(".caffemodel"), "snapshot_prefix");
      ClaimSnapshotPrefix(param_.snapshot_prefix());
    }
  }
  if (!resume_file.empty()) {
    LOG(INFO) << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  requested_early_exit_ = false;
  const int start_iter = iter_;
  Step(param_.max_iter() - iter_);
  engine_->Drain();
  RequireFiniteWeights(*net_, iter_);  // the last update too: a NaN model never ends a run with status 0
  if (requested_early_exit_ && engine_->iteration_dropped()) {
    // The data and random engines moved on inside the dropped iteration: a snapshot now would not resume exactly.
    LOG(WARNING) << "Stopped inside iteration " << iter_ << " (iter_size " << param_.iter_size()
                 << "): that iteration is dropped and no final snapshot is written";
  } else if (param_.snapshot_after_train() && (!param_.snapshot() || iter_ % param_.snapshot() != 0)) {
    Snapshot();
  }
  engine_->Finish(iter_);
  if (requested_early_exit_) {
    LOG(INFO) << "Optimization stopped early.";
    return;
  }
  // The final loss and test, as Caffe prints them: one more forward, whose loss enters the smoothed loss.
  if (param_.display() && iter_ % param_.display() == 0) {
    Dtype loss = 0;
    engine_->TrainForward(*net_, &loss);
    RequireFiniteLoss(loss, iter_);
    UpdateSmoothedLoss(loss, start_iter, param_.average_loss());
    LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
  }
  if (param_.test_interval() && iter_ % param_.test_interval() == 0) TestAll();
  LOG(INFO) << "Optimization Done.";
}

template <typename Dtype>
void Solver<Dtype>::Step(int iters) {
  const int start_iter = iter_;
  const int stop_iter = iter_ + iters;
  losses_.clear();
  smoothed_loss_ = 0;
  auto window_start = std::chrono::steady_clock::now();
  int window_iter = iter_;
  const int batch = net_->batch_size();  // images per iteration on this rank, for the images/s progress line

  while (iter_ < stop_iter) {
    if (param_.test_interval() && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization())) {
      TestAll();
    }
    if (action_) {
      SignalAction local = action_();
      // A request polled inside the last iteration (StopRequestedInIteration) counts too; a stop outranks a snapshot.
      if (local == SignalAction::kNone || pending_action_ == SignalAction::kStop) local = pending_action_;
      pending_action_ = SignalAction::kNone;
      const SignalAction a = engine_->AgreeOnAction(local, iter_);
      if (a == SignalAction::kSnapshot) Snapshot();
      if (a == SignalAction::kStop) {
        requested_early_exit_ = true;
        break;
      }
    }
    const bool display = param_.display() && iter_ % param_.display() == 0;
    const Dtype rate = GetLearningRate();
    const Dtype loss = engine_->Iterate(rate, iter_);
    if (engine_->iteration_dropped()) {
      requested_early_exit_ = true;
      break;
    }
    UpdateSmoothedLoss(loss, start_iter, param_.average_loss());
    if (display) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
      const int done = iter_ - window_iter;
      if (Strata::root_solver()) {
        if (done > 0) {
          LOG(INFO) << "Iteration " << iter_ << " (" << done / secs << " iter/s, " << secs << "s/" << done
                    << " iters), loss = " << smoothed_loss_;
          // Every replica's iter_size batches (a pipeline's stages share theirs).
          LOG(INFO) << "Iteration " << iter_ << ", " << static_cast<long long>(done / secs * batch *
                                                                                param_.iter_size() *
                                                                                engine_->replicas())
                    << " images/s";
        } else {
          LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
        }
        DisplayOutputs(net_->output_blobs(), *net_, "Train");
        LOG(INFO) << "Iteration " << iter_ << ", lr = " << rate;
        if (param_.loss_scale().dynamic()) {
          LOG(INFO) << "Iteration " << iter_ << ", loss scale = " << optimizer_->loss_scale() << " ("
                    << optimizer_->skipped_iterations() << " iterations skipped so far)";
        }
      }
      window_start = std::chrono::steady_clock::now();
      window_iter = iter_;
    }
    ++iter_;
    engine_->AfterIteration(iter_);
    if (param_.snapshot() && iter_ % param_.snapshot() == 0) Snapshot();
  }
}

template <typename Dtype>
void Solver<Dtype>::UpdateSmoothedLoss(Dtype loss, int start_iter, int average_loss) {
  if (static_cast<int>(losses_.size()) < average_loss) {
    losses_.push_back(loss);
    const int n = static_cast<int>(losses_.size());
    smoothed_loss_ = (smoothed_loss_ * (n - 1) + loss) / n;
  } else {
    const int idx = (iter_ - start_iter) % average_loss;
    smoothed_loss_ += (loss - losses_[idx]) / average_loss;
    losses_[idx] = loss;
  }
}

template <typename Dtype>
void Solver<Dtype>::DisplayOutputs(const std::vector<Blob<Dtype>*>& outputs, const Net<Dtype>& net,
                                   const char* which) {
  int score_index = 0;
  CHECK_EQ(outputs.size(), net.output_blob_ids().size()) << "DisplayOutputs takes the net's output blobs";
  for (size_t o = 0; o < outputs.size(); ++o) {
    Blob<Dtype>* out = outputs[o];
    const int id = net.output_blob_ids()[o];
    const std::string& name = net.blob_names()[id];
    const Dtype weight = id < static_cast<int>(net.blob_loss_weights().size()) ? net.blob_loss_weights()[id] : 0;
    for (int k = 0; k < out->count(); ++k) {
      std::ostringstream s;
      s << "    " << which << " net output #" << score_index++ << ": " << name << " = " << out->cpu_data()[k];
      if (weight) s << " (* " << weight << " = " << weight * out->cpu_data()[k] << " loss)";
      LOG(INFO) << s.str();
    }
  }
}

template <typename Dtype>
std::vector<std::vector<Dtype>> Solver<Dtype>::TestAll() {
  engine_->Drain();
  std::vector<std::vector<Dtype>> all;
  for (size_t i = 0; i < test_nets_.size(); ++i) all.push_back(Test(static_cast<int>(i)));
  return all;
}

template <typename Dtype>
std::vector<Dtype> Solver<Dtype>::Test(int test_net_id) {
  if (Strata::root_solver()) LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << test_net_id << ")";
  Net<Dtype>& test_net = *test_nets_[test_net_id];
  std::vector<Dtype> scores;
  Dtype loss = 0;
  const int test_iter = param_.test_iter(test_net_id);
  for (int i = 0; i < test_iter; ++i) {
    Dtype iter_loss;
    const auto& result = engine_->TestForward(test_net, &iter_loss);
    if (param_.test_compute_loss()) loss += iter_loss;
    size_t k = 0;
    for (Blob<Dtype>* blob : result) {
      for (int j = 0; j < blob->count(); ++j, ++k) {
        if (scores.size() <= k) scores.push_back(0);
        scores[k] += blob->cpu_data()[j];
      }
    }
  }
  for (auto& s : scores) s /= test_iter;
  engine_->ReduceScores(&scores);
  if (Strata::root_solver()) {
    if (param_.test_compute_loss()) LOG(INFO) << "Test loss: " << loss / test_iter;
    size_t k = 0;
    for (int id : test_net.output_blob_ids()) {
      const Blob<Dtype>* blob = test_net.blobs()[id].get();
      const std::string& name = test_net.blob_names()[id];
      const Dtype weight = test_net.blob_loss_weights().size() > static_cast<size_t>(id) ? test_net.blob_loss_weights()[id] : 0;
      for (int j = 0; j < blob->count(); ++j, ++k) {
        std::ostringstream s;
        s << "    Test net output #" << k << ": " << name << " = " << scores[k];
        if (weight) s << " (* " << weight << " = " << weight * scores[k] << " loss)";
        LOG(INFO) << s.str();
      }
    }
  }
  return scores;
}

template <typename Dtype>
std::string Solver<Dtype>::SnapshotFilename(const std::string& extension) const {
  return param_.snapshot_prefix() + "_iter_" + std::to_string(iter_) + extension;
}

template <typename Dtype>
std::vector<Layer<Dtype>*> Solver<Dtype>::RecordStreamLayers() {
  std::vector<Layer<Dtype>*> layers;
  auto add = [&](const Net<Dtype>& net) {
    for (const auto& layer : net.layers()) {
      if (layer->has_record_stream()) layers.push_back(layer.get());
    }
  };
  if (engine_) layers = engine_->record_stream_layers();
  add(*net_);
  for (const auto& test_net : test_nets_) add(*test_net);
  return layers;
}

template <typename Dtype>
void Solver<Dtype>::SaveSpreadState(SolverState* state) {
  optimizer_->SaveState(state);
  // Positions and seeds are the same on every rank (the Data layer counts global positions).
  for (Layer<Dtype>* layer : RecordStreamLayers()) {
    const typename Layer<Dtype>::RecordStream stream = layer->record_stream();
    state->add_data_position(stream.position);
    state->add_data_seed(stream.seed);
  }
}

namespace {

// The lowest rank holding each stage (its replicas hold the same state), in stage order.
std::vector<int> StageRepresentatives(const std::vector<int>& stage_of) {
  std::vector<int> first;
  for (int r = 0; r < static_cast<int>(stage_of.size()); ++r) {
    const size_t s = static_cast<size_t>(stage_of[static_cast<size_t>(r)]);
    if (first.size() <= s) first.resize(s + 1, -1);
    if (first[s] < 0) first[s] = r;
  }
  return first;
}

}  // namespace

// The whole net's learnable parameters are the stages' in stage order (stages are cuts by depth), so the whole
// net's history is, for each history set (Adam and AdaDelta keep two), the stages' slices one after another: the
// solverstate one rank would write, which Caffe's tools read too.
template <typename Dtype>
void Solver<Dtype>::GatherSpreadState(const std::vector<int>& stage_of, SolverState* state) {
  const std::vector<int> reps = StageRepresentatives(stage_of);
  const int rank = collectives()->rank();
  // The optimizer stage's state (K-FAC's blocks) is gathered over the stage's replicas to its first, the
  // representative (collective).
  SolverState part;
  optimizer_->SaveStageState(&part);
  std::string mine;
  if (reps[static_cast<size_t>(stage_of[static_cast<size_t>(rank)])] == rank) {
    SaveSpreadState(&part);
    mine = std::to_string(net_->learnable_params().size()) + "\n" + part.SerializeAsString();
  }
  const std::vector<std::string> all = collectives()->GatherToRoot(mine);
  if (!Strata::root_solver()) return;
  std::vector<SolverState> parts(reps.size());
  std::vector<int> params(reps.size());
  int sets = 0;
  for (size_t s = 0; s < reps.size(); ++s) {
    const std::string& got = all[static_cast<size_t>(reps[s])];
    const size_t newline = got.find('\n');
    STRATA_REQUIRE(newline != std::string::npos &&
                   parts[s].ParseFromArray(got.data() + newline + 1, static_cast<int>(got.size() - newline - 1)))
        << "snapshot: stage " << s << "'s solver state did not arrive whole";
    params[s] = std::stoi(got.substr(0, newline));
    if (params[s] > 0) sets = parts[s].history_size() / params[s];
  }
  for (int h = 0; h < sets; ++h) {
    for (size_t s = 0; s < parts.size(); ++s) {
      for (int i = 0; i < params[s]; ++i) *state->add_history() = parts[s].history(h * params[s] + i);
    }
  }
  for (const SolverState& part : parts) {
    for (int i = 0; i < part.data_position_size(); ++i) {
      state->add_data_position(part.data_position(i));
      state->add_data_seed(part.data_seed(i));
    }
  }
  // K-FAC's blocks, the stages' one after another (the net's order, as one rank saves them).
  for (const SolverState& part : parts) {
    if (!part.has_kfac()) continue;
    for (const KfacBlockState& block : part.kfac().block()) *state->mutable_kfac()->add_block() = block;
  }
  // A dynamic loss scale moves alike on every stage (they agree on every skipped step): stage 0's.
  if (parts[0].has_loss_scale()) {
    state->set_loss_scale(parts[0].loss_scale());
    state->set_loss_scale_finite_iters(parts[0].loss_scale_finite_iters());
  }
}

template <typename Dtype>
void Solver<Dtype>::StagePartOf(const SolverState& whole, const std::vector<int>& stage_of, const std::string& origin,
                                SolverState* part) {
  // Every rank's parameter and data-layer counts, to find where its stage's slices begin.
  const int ranks = static_cast<int>(stage_of.size());
  std::vector<double> counts(2 * static_cast<size_t>(ranks), 0.0);
  const int rank = collectives()->rank();
  counts[2 * static_cast<size_t>(rank)] = static_cast<double>(net_->learnable_params().size());
  counts[2 * static_cast<size_t>(rank) + 1] = static_cast<double>(RecordStreamLayers().size());
  collectives()->Allgather(counts.data(), std::vector<int>(static_cast<size_t>(ranks), 2));
  const std::vector<int> reps = StageRepresentatives(stage_of);
  const int my_stage = stage_of[static_cast<size_t>(rank)];
  int total_params = 0, total_data = 0, param_offset = 0, data_offset = 0;
  for (int s = 0; s < static_cast<int>(reps.size()); ++s) {
    const int p = static_cast<int>(counts[2 * static_cast<size_t>(reps[static_cast<size_t>(s)])]);
    const int d = static_cast<int>(counts[2 * static_cast<size_t>(reps[static_cast<size_t>(s)]) + 1]);
    if (s < my_stage) {
      param_offset += p;
      data_offset += d;
    }
    total_params += p;
    total_data += d;
  }
  const int params = static_cast<int>(net_->learnable_params().size());
  const int sets = total_params > 0 ? whole.history_size() / total_params : 0;
  STRATA_REQUIRE(sets * total_params == whole.history_size())
      << origin << " holds " << whole.history_size() << " history blobs; this pipeline's stages hold "
      << total_params << " learnable parameters in all (a different net or solver type?)";
  // Only what the stage restores from its part (the history, K-FAC's, the loss scale, the data streams); the rest
  // is read from `whole`.
  part->Clear();
  // Every stage's K-FAC blocks: the stage takes its own (KfacPreconditioner::RestoreState).
  if (whole.has_kfac()) *part->mutable_kfac() = whole.kfac();
  if (whole.has_loss_scale()) {
    part->set_loss_scale(whole.loss_scale());
    part->set_loss_scale_finite_iters(whole.loss_scale_finite_iters());
  }
  for (int h = 0; h < sets; ++h) {
    for (int i = 0; i < params; ++i) *part->add_history() = whole.history(h * total_params + param_offset + i);
  }
  // A count that does not match is left for RestoreRecordStreams to report (it sees the whole list).
  if (whole.data_position_size() != total_data) {
    *part->mutable_data_position() = whole.data_position();
    *part->mutable_data_seed() = whole.data_seed();
    return;
  }
  const int mine = static_cast<int>(counts[2 * static_cast<size_t>(rank) + 1]);
  for (int i = data_offset; i < data_offset + mine; ++i) {
    part->add_data_position(whole.data_position(i));
    if (whole.data_seed_size() == total_data) part->add_data_seed(whole.data_seed(i));
  }
}

template <typename Dtype>
void Solver<Dtype>::Snapshot() {
  engine_->Drain();
  // Each rank's random engine: ranks may have drawn differently, and only rank 0 writes. Collective.
  std::ostringstream rng;
  rng << Strata::rng();
  const std::vector<std::string> rank_rngs =
      collectives() ? collectives()->GatherToRoot(rng.str()) : std::vector<std::string>{rng.str()};
  // A pipeline's weights, history and data positions are spread over its stages, K-FAC's factors over the ranks
  // that own them: gathered to rank 0 (collective).
  NetParameter weights;
  const bool gathered = engine_->GatherWeights(&weights, param_.snapshot_diff());
  SolverState state;
  const std::vector<int> stage_of = engine_->stage_of_ranks();
  if (stage_of.empty()) {
    optimizer_->SaveStageState(&state);
  } else {
    GatherSpreadState(stage_of, &state);
  }
  if (!Strata::root_solver()) return;
  // Files that check themselves, in either of Caffe's formats (util/snapshot_files.hpp).
  const SolverParameter::SnapshotFormat format = param_.snapshot_format();
  const char* format_name = format == SolverParameter::HDF5 ? "HDF5" : "binary proto";
  const std::string model_file = SnapshotFilename(CaffemodelExtension(format));
  const std::string state_file = SnapshotFilename(SolverstateExtension(format));
  if (!gathered) net_->ToProto(&weights, param_.snapshot_diff());
  RequireFiniteWeights(weights, iter_);
  LOG(INFO) << "Snapshotting to " << format_name << " file " << model_file;
  const uint32_t model_checksum = WriteCaffemodel(&weights, iter_, model_file, format);
  NetParameter().Swap(&weights);  // its memory back before the history's copy
  MaybeInjectFault(FaultPoint::kSnapshot, iter_);

  state.set_iter(iter_);
  RecordCaffemodel(model_file, model_checksum, iter_, state_file, &state);
  state.set_current_step(current_step_);
  if (stage_of.empty()) SaveSpreadState(&state);
  state.set_num_ranks(Strata::solver_count());
  state.set_rng_state(rank_rngs[0]);
  for (const std::string& r : rank_rngs) state.add_rank_rng_state(r);
  LOG(INFO) << "Snapshotting solver state to " << format_name << " file " << state_file;
  WriteSolverState(&state, state_file, format);
}

template <typename Dtype>
void Solver<Dtype>::Restore(const std::string& state_file) {
  SolverState state;
  ReadSolverState(state_file, &state);
  Restore(state, state_file);
}

template <typename Dtype>
void Solver<Dtype>::Restore(const SolverState& state, const std::string& state_file) {
  // A negative step would index stepvalue before its start (multistep) in GetLearningRate.
  STRATA_REQUIRE(state.iter() >= 0 && state.current_step() >= 0)
      << state_file << ": corrupt state: iteration " << state.iter() << ", learning-rate step "
      << state.current_step() << " (neither can be negative)";
  if (state.has_num_ranks()) {
    STRATA_REQUIRE(state.num_ranks() == Strata::solver_count())
        << state_file << " was written by a run with " << state.num_ranks() << " rank(s); this run has "
        << Strata::solver_count() << " (the data order would differ)";
  }
  // A pipeline stage restores its part of the history and data positions (collective).
  const std::vector<int> stage_of = engine_->stage_of_ranks();
  SolverState part;
  if (!stage_of.empty()) StagePartOf(state, stage_of, state_file, &part);
  const SolverState& mine = stage_of.empty() ? state : part;
  // The optimizer's state (its history blobs): it checks that the file is for this net and solver type.
  optimizer_->RestoreState(mine, state_file);
  // The caffemodel written with this state, and no other (util/snapshot_files.hpp).
  NetParameter weights;
  const std::string model = ReadPairedCaffemodel(state, state_file, &weights);
  if (!model.empty()) {
    try {
      net_->CopyTrainedLayersFrom(weights);
    } catch (const Error& e) {
      throw Error(model + ": " + e.what());
    }
  }
  iter_ = state.iter();
  current_step_ = state.current_step();
  RestoreRecordStreams(mine, state_file);
  RestoreRandomEngine(state, state_file);
}

template <typename Dtype>
void Solver<Dtype>::RestoreRecordStreams(const SolverState& state, const std::string& state_file) {
  const std::vector<Layer<Dtype>*> layers = RecordStreamLayers();
  const int n = static_cast<int>(layers.size());
  if (state.data_position_size() == 0 && n > 0) {
    // Written before Strata recorded data positions: the readers start where a new run would.
    LOG(WARNING) << state_file << " records no data layer positions (an older solverstate): the data layers "
                 << "start over, so the resumed run does not see the batches the uninterrupted run would";
    return;
  }
  STRATA_REQUIRE(state.data_position_size() == n)
      << state_file << " records " << state.data_position_size() << " data layer position(s); the train and test "
      << "nets have " << n << " data layer(s) (a different net?)";
  STRATA_REQUIRE(state.data_seed_size() == 0 || state.data_seed_size() == n)
      << state_file << " records " << state.data_seed_size() << " data transform seed(s) for " << n
      << " data layer(s): the file is corrupt";
  if (state.data_seed_size() == 0 && n > 0) {
    LOG(WARNING) << state_file << " records no data transform seeds (an older solverstate): random crops and "
                 << "mirrors after the resume differ from the uninterrupted run's unless random_seed is set";
  }
  for (int i = 0; i < n; ++i) {
    typename Layer<Dtype>::RecordStream stream = layers[i]->record_stream();
    stream.position = state.data_position(i);
    if (state.data_seed_size()) stream.seed = state.data_seed(i);
    layers[i]->set_record_stream(stream);
  }
}

template <typename Dtype>
void Solver<Dtype>::RestoreRandomEngine(const SolverState& state, const std::string& state_file) {
  const int rank = Strata::solver_rank();
  std::string engine;
  if (state.rank_rng_state_size() > 0) {
    STRATA_REQUIRE(rank < state.rank_rng_state_size())
        << state_file << " records the random engines of " << state.rank_rng_state_size() << " rank(s); this is rank "
        << rank;
    engine = state.rank_rng_state(rank);
  } else if (state.has_rng_state()) {
    // An older solverstate kept rank 0's engine only.
    if (Strata::solver_count() > 1 && Strata::root_solver()) {
      LOG(WARNING) << state_file << " records rank 0's random engine only (an older solverstate): the other ranks "
                   << "draw differently from the uninterrupted run";
    }
    engine = state.rng_state();
  } else {
    if (Strata::root_solver()) {
      LOG(WARNING) << state_file << " records no random engine: random layers (Dropout) draw differently from "
                   << "the uninterrupted run";
    }
    return;
  }
  std::istringstream in(engine);
  in >> Strata::rng();
  STRATA_REQUIRE(!in.fail()) << state_file << ": corrupt random-engine state";
}

template <typename Dtype>
void LoadWeights(Net<Dtype>* net, const std::vector<std::string>& files, const std::string& origin, bool strict) {
  STRATA_REQUIRE(!files.empty()) << origin << " names no file";
  std::string joined;
  for (const std::string& f : files) joined += (joined.empty() ? "" : ",") + f;
  std::set<std::string> untouched;
  bool first = true;
  for (const std::string& w : files) {
    LOG(INFO) << "Initialising from " << w;
    const std::vector<std::string> left = net->CopyTrainedLayersFrom(w);
    std::set<std::string> still;
    for (const std::string& name : left) {
      if (first || untouched.count(name)) still.insert(name);
    }
    untouched.swap(still);
    first = false;
  }
  if (untouched.empty()) return;
  std::string names;
  for (const std::string& name : untouched) names += (names.empty() ? "'" : ", '") + name + "'";
  STRATA_REQUIRE(!strict) << origin << "=" << joined << " set no weights for layer(s) " << names << " of net '"
                          << net->name() << "' (--strict_weights)";
  LOG(WARNING) << origin << "=" << joined << " set no weights for layer(s) " << names << " of net '" << net->name()
               << "': they keep their initial values";
}

template void LoadWeights<float>(Net<float>*, const std::vector<std::string>&, const std::string&, bool);
template void LoadWeights<double>(Net<double>*, const std::vector<std::string>&, const std::string&, bool);

STRATA_INSTANTIATE_CLASS(Solver);

}  // namespace strata
