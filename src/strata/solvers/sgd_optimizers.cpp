#include "strata/solvers/sgd_optimizers.hpp"

#include <cmath>

#include "strata/cpu_dispatch.hpp"
#include "strata/math_functions.hpp"

namespace strata {

#ifdef STRATA_USE_CUDA
// The same updates on device memory (sgd_optimizers.cu): in GPU mode the weights, gradients and history stay on the
// GPU and no step copies them to the host.
template <typename Dtype>
void sgd_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr);
template <typename Dtype>
void nesterov_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr);
template <typename Dtype>
void adaptive_rate_update_gpu(int n, Dtype* g, Dtype* h, Dtype decay, Dtype weight, Dtype delta, Dtype lr);
template <typename Dtype>
void adadelta_update_gpu(int n, Dtype* g, Dtype* h, Dtype* d, Dtype momentum, Dtype delta, Dtype lr);
template <typename Dtype>
void adam_update_gpu(int n, Dtype* g, Dtype* m, Dtype* s, Dtype b1, Dtype b2, Dtype eps, Dtype step);
#endif

namespace {

// The CPU rules below are functions (g, i) -> step that advance element i's history. Each runs in one of two
// sweeps: Caffe's ComputeUpdateValue (the step replaces the gradient) or the one-pass update (OnePassUpdate).
template <typename Dtype, typename Rule>
STRATA_HOT_KERNEL void step_sweep(Blob<Dtype>* p, Rule rule) {
  // In whatever layout the gradient and history are (Optimizer::AlignLayouts made them alike): elementwise.
  Dtype* g = p->mutable_cpu_diff_as_is();
  const size_t n = static_cast<size_t>(p->count());
  for (size_t i = 0; i < n; ++i) g[i] = rule(g[i], i);
}

// g' = grad_scale g + decay term; w -= rule(g', i); g = 0. The decay term is chosen outside the loop so that
// the loop body stays branch-free and vectorises.
template <typename Dtype, typename Rule>
STRATA_HOT_KERNEL void one_pass_sweep(Blob<Dtype>* p, size_t begin, size_t end,
                                      const typename Optimizer<Dtype>::OnePassStep& s, Rule rule) {
  Dtype* w = p->mutable_cpu_data_as_is();  // aligned with g and the history by Optimizer::AlignLayouts
  Dtype* g = p->mutable_cpu_diff_as_is();
  const Dtype scale = s.grad_scale, decay = s.decay;
  auto sweep = [&](auto decay_term) {
    for (size_t i = begin; i < end; ++i) {
      w[i] -= rule(scale * g[i] + decay_term(w[i]), i);
      g[i] = 0;
    }
  };
  if (decay == 0) {
    sweep([](Dtype) { return Dtype(0); });
  } else if (s.l1) {
    sweep([decay](Dtype x) { return decay * static_cast<Dtype>((x > 0) - (x < 0)); });
  } else {
    sweep([decay](Dtype x) { return decay * x; });
  }
}

}  // namespace

template <typename Dtype>
auto SGDOptimizer<Dtype>::Rule(int param_id, Dtype rate) {
  Dtype* h = this->history_[param_id]->mutable_cpu_data_as_is();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  return [h, lr, momentum](Dtype g, size_t i) {
    h[i] = momentum * h[i] + lr * g;
    return h[i];
  };
}

template <typename Dtype>
void SGDOptimizer<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    sgd_update_gpu(p->count(), p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(),
                   static_cast<Dtype>(this->param_.momentum()), rate * this->net_->params_lr()[param_id]);
    return;
  }
#endif
  step_sweep(p, Rule(param_id, rate));
}

template <typename Dtype>
void SGDOptimizer<Dtype>::OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                   const typename Optimizer<Dtype>::OnePassStep& step) {
  one_pass_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
auto NesterovOptimizer<Dtype>::Rule(int param_id, Dtype rate) {
  Dtype* h = this->history_[param_id]->mutable_cpu_data_as_is();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  return [h, lr, momentum](Dtype g, size_t i) {
    const Dtype previous = h[i];
    h[i] = momentum * h[i] + lr * g;
    return (1 + momentum) * h[i] - momentum * previous;
  };
}

template <typename Dtype>
void NesterovOptimizer<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    nesterov_update_gpu(p->count(), p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(),
                        static_cast<Dtype>(this->param_.momentum()), rate * this->net_->params_lr()[param_id]);
    return;
  }
#endif
  step_sweep(p, Rule(param_id, rate));
}

template <typename Dtype>
void NesterovOptimizer<Dtype>::OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                        const typename Optimizer<Dtype>::OnePassStep& step) {
  one_pass_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
AdaptiveRateOptimizer<Dtype>::AdaptiveRateOptimizer(const SolverParameter& param, Net<Dtype>* net, const char* name,
                                                    Dtype decay, Dtype weight)
    : Optimizer<Dtype>(param, net), decay_(decay), weight_(weight) {
  STRATA_REQUIRE(this->param_.momentum() == 0)
      << "momentum cannot be used with " << name << " (it is " << this->param_.momentum() << ")";
}

template <typename Dtype>
auto AdaptiveRateOptimizer<Dtype>::Rule(int param_id, Dtype rate) {
  Dtype* h = this->history_[param_id]->mutable_cpu_data_as_is();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype decay = decay_, weight = weight_, delta = this->param_.delta();
  return [h, lr, decay, weight, delta](Dtype g, size_t i) {
    h[i] = decay * h[i] + weight * g * g;
    return lr * g / (std::sqrt(h[i]) + delta);
  };
}

template <typename Dtype>
void AdaptiveRateOptimizer<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    adaptive_rate_update_gpu(p->count(), p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(), decay_,
                             weight_, static_cast<Dtype>(this->param_.delta()),
                             rate * this->net_->params_lr()[param_id]);
    return;
  }
#endif
  step_sweep(p, Rule(param_id, rate));
}

template <typename Dtype>
void AdaptiveRateOptimizer<Dtype>::OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                            const typename Optimizer<Dtype>::OnePassStep& step) {
  one_pass_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
RMSPropOptimizer<Dtype>::RMSPropOptimizer(const SolverParameter& param, Net<Dtype>* net)
    : AdaptiveRateOptimizer<Dtype>(param, net, "RMSProp", param.rms_decay(), Dtype(1) - param.rms_decay()) {
  STRATA_REQUIRE(param.rms_decay() >= 0 && param.rms_decay() < 1)
      << "RMSProp needs 0 <= rms_decay < 1, got " << param.rms_decay();
}

template <typename Dtype>
AdaDeltaOptimizer<Dtype>::AdaDeltaOptimizer(const SolverParameter& param, Net<Dtype>* net)
    : Optimizer<Dtype>(param, net) {
  STRATA_REQUIRE(this->param_.momentum() >= 0 && this->param_.momentum() < 1)
      << "AdaDelta needs 0 <= momentum (its decay rate) < 1, got " << this->param_.momentum();
  this->AddSecondHistory();  // the history of updates after the history of gradients
}

template <typename Dtype>
auto AdaDeltaOptimizer<Dtype>::Rule(int param_id, Dtype rate) {
  const size_t num_params = this->net_->learnable_params().size();
  Dtype* h = this->history_[param_id]->mutable_cpu_data_as_is();
  Dtype* d = this->history_[param_id + num_params]->mutable_cpu_data_as_is();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype m = this->param_.momentum(), delta = this->param_.delta();
  return [h, d, lr, m, delta](Dtype g, size_t i) {
    h[i] = m * h[i] + (1 - m) * g * g;
    const Dtype u = std::sqrt((d[i] + delta) / (h[i] + delta)) * g;
    d[i] = m * d[i] + (1 - m) * u * u;
    return lr * u;
  };
}

template <typename Dtype>
void AdaDeltaOptimizer<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    const size_t num_params = this->net_->learnable_params().size();
    adadelta_update_gpu(p->count(), p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(),
                        this->history_[param_id + num_params]->mutable_gpu_data(),
                        static_cast<Dtype>(this->param_.momentum()), static_cast<Dtype>(this->param_.delta()),
                        rate * this->net_->params_lr()[param_id]);
    return;
  }
#endif
  step_sweep(p, Rule(param_id, rate));
}

template <typename Dtype>
void AdaDeltaOptimizer<Dtype>::OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                        const typename Optimizer<Dtype>::OnePassStep& step) {
  one_pass_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
AdamOptimizer<Dtype>::AdamOptimizer(const SolverParameter& param, Net<Dtype>* net) : Optimizer<Dtype>(param, net) {
  STRATA_REQUIRE(this->param_.momentum() >= 0 && this->param_.momentum() < 1)
      << "Adam needs 0 <= momentum (beta1) < 1, got " << this->param_.momentum();
  STRATA_REQUIRE(this->param_.momentum2() >= 0 && this->param_.momentum2() < 1)
      << "Adam needs 0 <= momentum2 (beta2) < 1, got " << this->param_.momentum2();
  this->AddSecondHistory();  // second moments after the first moments
}

template <typename Dtype>
Dtype AdamOptimizer<Dtype>::StepSize(int param_id, Dtype rate, int iter) const {
  const Dtype b1 = this->param_.momentum();
  const Dtype b2 = this->param_.momentum2();
  const int t = iter + 1;
  const Dtype correction = std::sqrt(Dtype(1) - std::pow(b2, Dtype(t))) / (Dtype(1) - std::pow(b1, Dtype(t)));
  return rate * this->net_->params_lr()[param_id] * correction;
}

template <typename Dtype>
auto AdamOptimizer<Dtype>::Rule(int param_id, Dtype rate, int iter) {
  const size_t num_params = this->net_->learnable_params().size();
  Dtype* m = this->history_[param_id]->mutable_cpu_data_as_is();
  Dtype* s = this->history_[param_id + num_params]->mutable_cpu_data_as_is();
  const Dtype b1 = this->param_.momentum();
  const Dtype b2 = this->param_.momentum2();
  const Dtype eps = this->param_.delta();
  const Dtype step = StepSize(param_id, rate, iter);
  return [m, s, b1, b2, eps, step](Dtype g, size_t i) {
    m[i] = b1 * m[i] + (1 - b1) * g;
    s[i] = b2 * s[i] + (1 - b2) * g * g;
    return step * m[i] / (std::sqrt(s[i]) + eps);
  };
}

template <typename Dtype>
void AdamOptimizer<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    const size_t num_params = this->net_->learnable_params().size();
    adam_update_gpu(p->count(), p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(),
                    this->history_[param_id + num_params]->mutable_gpu_data(),
                    static_cast<Dtype>(this->param_.momentum()), static_cast<Dtype>(this->param_.momentum2()),
                    static_cast<Dtype>(this->param_.delta()), StepSize(param_id, rate, iter));
    return;
  }
#endif
  step_sweep(p, Rule(param_id, rate, iter));
}

template <typename Dtype>
void AdamOptimizer<Dtype>::OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                    const typename Optimizer<Dtype>::OnePassStep& step) {
  one_pass_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate, iter));
}

STRATA_INSTANTIATE_CLASS(SGDOptimizer);
STRATA_INSTANTIATE_CLASS(NesterovOptimizer);
STRATA_INSTANTIATE_CLASS(AdaptiveRateOptimizer);
STRATA_INSTANTIATE_CLASS(AdaGradOptimizer);
STRATA_INSTANTIATE_CLASS(RMSPropOptimizer);
STRATA_INSTANTIATE_CLASS(AdaDeltaOptimizer);
STRATA_INSTANTIATE_CLASS(AdamOptimizer);
REGISTER_OPTIMIZER_CLASS(SGD);
REGISTER_OPTIMIZER_CLASS(Nesterov);
REGISTER_OPTIMIZER_CLASS(AdaGrad);
REGISTER_OPTIMIZER_CLASS(RMSProp);
REGISTER_OPTIMIZER_CLASS(AdaDelta);
REGISTER_OPTIMIZER_CLASS(Adam);

}  // namespace strata
