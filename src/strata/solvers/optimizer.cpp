#include "strata/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "strata/comm/collectives.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
Optimizer<Dtype>::Optimizer(const SolverParameter& param, Net<Dtype>* net)
    : param_(param), net_(net), loss_scaler_(param.loss_scale()) {
  for (Blob<Dtype>* p : net_->learnable_params()) history_.push_back(std::make_shared<Blob<Dtype>>(p->shape()));
  set_replicas(1);
}

template <typename Dtype>
Optimizer<Dtype>::~Optimizer() = default;

template <typename Dtype>
void Optimizer<Dtype>::AddSecondHistory() {
  const size_t n = history_.size();
  for (size_t i = 0; i < n; ++i) history_.push_back(std::make_shared<Blob<Dtype>>(history_[i]->shape()));
}

template <typename Dtype>
void Optimizer<Dtype>::set_replicas(int replicas) {
  replicas_ = replicas;
  UseLossScale();
}

template <typename Dtype>
void Optimizer<Dtype>::UseLossScale() {
  gradient_scale_ = Dtype(1) / (static_cast<Dtype>(replicas_) * static_cast<Dtype>(param_.iter_size()));
  if (!loss_scaler_.active()) return;
  // In double: the scale may reach float's largest powers of two. A power of two divides out exactly.
  gradient_scale_ = static_cast<Dtype>(gradient_scale_ / loss_scaler_.scale());
  net_->set_loss_scale(static_cast<Dtype>(loss_scaler_.scale()));
}

template <typename Dtype>
bool Optimizer<Dtype>::GradientsFinite() const {
  const auto& params = net_->learnable_params();
  const bool finite = [&] {
#ifdef STRATA_USE_CUDA
    if (Strata::mode() == Strata::GPU) {
      std::vector<std::pair<const Dtype*, size_t>> spans;
      for (Blob<Dtype>* p : params) spans.emplace_back(p->gpu_diff(), static_cast<size_t>(p->count()));
      return gpu_all_finite(spans);
    }
#endif
    return std::all_of(params.begin(), params.end(), [](Blob<Dtype>* p) {
      return cpu_all_finite(static_cast<size_t>(p->count()), p->cpu_diff_as_is());
    });
  }();
  return model_parts_ ? model_parts_->AllTrue(finite) : finite;
}

template <typename Dtype>
void Optimizer<Dtype>::set_collectives(Collectives* collectives) {
  if (stage_) stage_->set_collectives(collectives);
}

template <typename Dtype>
void Optimizer<Dtype>::set_model_parts(Collectives* parts) {
  model_parts_ = parts;
  if (stage_) stage_->set_model_parts(parts);
}

template <typename Dtype>
bool Optimizer<Dtype>::updates_in_one_pass() const {
  return has_one_pass_update() && Strata::mode() == Strata::CPU;
}

template <typename Dtype>
void Optimizer<Dtype>::BeginIteration(int iter) {
  if (stage_) stage_->BeginIteration(iter);
}

template <typename Dtype>
void Optimizer<Dtype>::BeforeBackward(int pass) {
  if (stage_) stage_->BeforeBackward(pass);
}

template <typename Dtype>
void Optimizer<Dtype>::ClipGradients(Dtype diff_scale) {
  const Dtype clip = param_.clip_gradients();
  if (clip < 0) return;
  Dtype sumsq = 0;
  for (Blob<Dtype>* p : net_->learnable_params()) sumsq += p->sumsq_diff();
  if (model_parts_) model_parts_->Allreduce(&sumsq, 1);
  const Dtype norm = std::sqrt(sumsq) * diff_scale;
  if (norm > clip) {
    const Dtype scale = clip / norm;
    LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm " << norm << " > " << clip << ") by scale "
              << scale;
    for (Blob<Dtype>* p : net_->learnable_params()) p->scale_diff(scale);
  }
}

template <typename Dtype>
void Optimizer<Dtype>::Normalize(int param_id) {
  if (gradient_scale_ == 1) return;
  net_->learnable_params()[param_id]->scale_diff(gradient_scale_);
}

template <typename Dtype>
void Optimizer<Dtype>::Regularize(int param_id) {
  Blob<Dtype>* p = net_->learnable_params()[param_id];
  const Dtype decay = param_.weight_decay() * net_->params_weight_decay()[param_id];
  if (decay == 0 || p->count() == 0) return;
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    if (param_.regularization_type() == "L2") {
      gpu_axpy(p->count(), decay, p->gpu_data(), p->mutable_gpu_diff());
    } else {
      gpu_add_sign(p->count(), decay, p->gpu_data(), p->mutable_gpu_diff());
    }
    return;
  }
#endif
  p->AlignDiffWithData();
  if (param_.regularization_type() == "L2") {
    cpu_axpy(p->count(), decay, p->cpu_data_as_is(), p->mutable_cpu_diff_as_is());
  } else {
    const Dtype* w = p->cpu_data_as_is();
    Dtype* g = p->mutable_cpu_diff_as_is();
    for (int i = 0; i < p->count(); ++i) g[i] += decay * static_cast<Dtype>((w[i] > 0) - (w[i] < 0));
  }
}

template <typename Dtype>
void Optimizer<Dtype>::AllocateUpdateState() {
  for (auto& h : history_) h->mutable_cpu_data();
  for (Blob<Dtype>* p : net_->learnable_params()) {
    p->mutable_cpu_data();
    p->mutable_cpu_diff();
  }
}

template <typename Dtype>
void Optimizer<Dtype>::AlignLayouts(int param_id) {
  if (Strata::mode() == Strata::GPU) return;  // the device copies are plain
  Blob<Dtype>* p = net_->learnable_params()[param_id];
  p->AlignDiffWithData();
  // history_ holds one blob per param, or two (AdaDelta, Adam: the second ones after all the first).
  const size_t params = net_->learnable_params().size();
  for (size_t h = static_cast<size_t>(param_id); h < history_.size(); h += params) p->AlignWithData(*history_[h]);
}

template <typename Dtype>
void Optimizer<Dtype>::UpdateSlice(int param_id, size_t begin, size_t end, Dtype rate, int iter, Dtype grad_scale) {
  CHECK(has_one_pass_update()) << type() << " has no one-pass update";
  CHECK_LE(end, static_cast<size_t>(net_->learnable_params()[param_id]->count()));
  const Dtype decay = param_.weight_decay() * net_->params_weight_decay()[param_id];
  OnePassUpdate(param_id, begin, end, rate, iter, OnePassStep{grad_scale, decay, param_.regularization_type() == "L1"});
}

template <typename Dtype>
void Optimizer<Dtype>::UpdateParam(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = net_->learnable_params()[param_id];
  const bool one_pass = updates_in_one_pass();
  if (net_->params_lr()[param_id] == 0) {
    // Frozen: no step, but the one-pass path promises zero gradients after the update.
    if (one_pass) p->clear_diff();
    return;
  }
  if (one_pass) {
    AlignLayouts(param_id);
    UpdateSlice(param_id, 0, static_cast<size_t>(p->count()), rate, iter, gradient_scale_);
    return;
  }
  Normalize(param_id);
  StepParam(param_id, rate, iter);
}

template <typename Dtype>
void Optimizer<Dtype>::StepParam(int param_id, Dtype rate, int iter) {
  AlignLayouts(param_id);
  Regularize(param_id);
  ComputeUpdateValue(param_id, rate, iter);
  net_->learnable_params()[param_id]->Update();
}

template <typename Dtype>
void Optimizer<Dtype>::UpdateLayer(int layer_id, Dtype rate, int iter) {
  // Clipping, stages and a dynamic loss scale need the whole net's gradient, so they are done by Apply, never per
  // layer.
  CHECK(!needs_whole_gradient()) << type() << " updates the whole net at once; use Apply";
  for (int param_id : net_->learnable_params_final_after(layer_id)) UpdateParam(param_id, rate, iter);
}

template <typename Dtype>
void Optimizer<Dtype>::Apply(Dtype rate, int iter) {
  const double loss_scale = loss_scaler_.scale();  // the one this gradient was computed with: the next may differ
  // The gradient and the stage's statistics are the same on every rank (reduced), so every rank skips the same
  // iterations.
  bool statistics_finite = !stage_ || stage_->ReduceStatistics(iter);
  if (loss_scaler_.dynamic()) {
    // Each part reduced its own statistics: every part skips if one must.
    if (stage_ && model_parts_) statistics_finite = model_parts_->AllTrue(statistics_finite);
    const std::string overflowed = !GradientsFinite()   ? "the gradient"
                                   : !statistics_finite ? "a statistic of the " + std::string(stage_->type()) + " stage"
                                                        : "";
    if (!loss_scaler_.AfterBackward(overflowed, iter)) {
      ++skipped_iterations_;
      gradients_zeroed_ = false;
      UseLossScale();
      return;
    }
  }
  const auto& params = net_->learnable_params();
  if (stage_) {
    ApplyWithStage(rate, iter);
  } else if (param_.clip_gradients() >= 0) {
    // Caffe clips the gradient summed over iter_size's passes; over replicas, their mean (and the loss unscaled).
    Dtype diff_scale = Dtype(1) / static_cast<Dtype>(replicas_);
    if (loss_scaler_.active()) diff_scale = static_cast<Dtype>(diff_scale / loss_scale);
    ClipGradients(diff_scale);
    for (size_t p = 0; p < params.size(); ++p) UpdateParam(static_cast<int>(p), rate, iter);
  } else {
    for (int layer_id = net_->num_layers() - 1; layer_id >= 0; --layer_id) {
      for (int param_id : net_->learnable_params_final_after(layer_id)) UpdateParam(param_id, rate, iter);
    }
  }
  gradients_zeroed_ = updates_in_one_pass();
  if (loss_scaler_.dynamic()) UseLossScale();  // it may have grown
}

template <typename Dtype>
void Optimizer<Dtype>::ApplyWithStage(Dtype rate, int iter) {
  const auto& params = net_->learnable_params();
  // The reduced gradient is a sum over the ranks and passes: its mean first, and the stage clips that.
  for (size_t p = 0; p < params.size(); ++p) Normalize(static_cast<int>(p));
  ClipGradients(1);
  stage_->Precondition(rate, iter, gradient_scale_);
  for (size_t p = 0; p < params.size(); ++p) {
    const int id = static_cast<int>(p);
    if (net_->params_lr()[id] == 0) continue;
    StepParam(id, rate, iter);  // aligns the layouts first: the stage wrote a plain gradient
  }
}

template <typename Dtype>
void Optimizer<Dtype>::SaveState(SolverState* state) const {
  for (const auto& h : history_) h->ToProto(state->add_history());
  loss_scaler_.SaveState(state);
}

template <typename Dtype>
void Optimizer<Dtype>::SaveStageState(SolverState* state) {
  if (stage_) stage_->SaveState(state);
}

template <typename Dtype>
void Optimizer<Dtype>::RestoreState(const SolverState& state, const std::string& origin) {
  STRATA_REQUIRE(state.history_size() == static_cast<int>(history_.size()))
      << origin << " holds " << state.history_size() << " history blobs; this " << type() << " solver on net '"
      << net_->name() << "' needs " << history_.size() << " (a different net or solver type?)";
  for (int i = 0; i < state.history_size(); ++i) {
    try {
      history_[i]->FromProto(state.history(i), false);
    } catch (const Error& e) {
      throw Error(origin + ": history blob " + std::to_string(i) + ": " + e.what());
    }
  }
  loss_scaler_.RestoreState(state, origin);
  UseLossScale();
  if (stage_) {
    stage_->RestoreState(state, origin);
  } else if (state.has_kfac()) {
    LOG(WARNING) << origin << " holds K-FAC's factors; this " << type() << " solver does not use them";
  }
}

STRATA_INSTANTIATE_CLASS(Optimizer);

template <typename Dtype>
std::map<std::string, typename OptimizerRegistry<Dtype>::Creator>& OptimizerRegistry<Dtype>::registry() {
  static std::map<std::string, Creator> reg;
  return reg;
}

template <typename Dtype>
void OptimizerRegistry<Dtype>::Add(const std::string& type, Creator c) {
  CHECK(registry().count(type) == 0) << "solver type " << type << " registered twice";
  registry()[type] = std::move(c);
}

template <typename Dtype>
std::vector<std::string> OptimizerRegistry<Dtype>::Types() {
  std::vector<std::string> types;
  for (const auto& kv : registry()) types.push_back(kv.first);
  return types;
}

template <typename Dtype>
std::string OptimizerRegistry<Dtype>::TypeOf(const SolverParameter& param) {
  std::string type = param.type();
  // The legacy enum, when the string is left at its default.
  if (!param.has_type() && param.has_solver_type()) {
    static const char* names[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};
    type = names[param.solver_type()];
  }
  if (registry().count(type) == 0) {
    std::string known;
    for (const auto& t : Types()) known += (known.empty() ? "" : ", ") + t;
    STRATA_FAIL() << "unknown solver type '" << type << "' (known: " << known << ")";
  }
  return type;
}

template <typename Dtype>
std::unique_ptr<Optimizer<Dtype>> OptimizerRegistry<Dtype>::Create(const SolverParameter& param, Net<Dtype>* net) {
  return registry().at(TypeOf(param))(param, net);
}

template class OptimizerRegistry<float>;
template class OptimizerRegistry<double>;

}  // namespace strata
