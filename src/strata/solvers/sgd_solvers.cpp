#include "strata/solvers/sgd_solvers.hpp"

#include <cmath>

#include "strata/cpu_dispatch.hpp"
#include "strata/math_functions.hpp"

namespace strata {

#ifdef STRATA_USE_CUDA
// The same updates on device memory (sgd_solvers.cu): in GPU mode the weights, gradients and history stay on the
// GPU and no step copies them to the host.
template <typename Dtype>
void sgd_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr);
template <typename Dtype>
void nesterov_update_gpu(int n, Dtype* g, Dtype* h, Dtype momentum, Dtype lr);
template <typename Dtype>
void adam_update_gpu(int n, Dtype* g, Dtype* m, Dtype* s, Dtype b1, Dtype b2, Dtype eps, Dtype step);
#endif

namespace {

// The CPU rules below are functions (g, i) -> step that advance element i's history. Each runs in one of two
// sweeps: Caffe's ComputeUpdateValue (the step replaces the gradient) or the one-pass update.
template <typename Dtype, typename Rule>
STRATA_HOT_KERNEL void step_sweep(Blob<Dtype>* p, Rule rule) {
  Dtype* g = p->mutable_cpu_diff();
  const size_t n = static_cast<size_t>(p->count());
  for (size_t i = 0; i < n; ++i) g[i] = rule(g[i], i);
}

// g' = grad_scale g + decay term; w -= rule(g', i); g = 0. The decay term is chosen outside the loop so that
// the loop body stays branch-free and vectorises.
template <typename Dtype, typename Rule>
STRATA_HOT_KERNEL void fused_sweep(Blob<Dtype>* p, size_t begin, size_t end, const typename Solver<Dtype>::FusedStep& s, Rule rule) {
  Dtype* w = p->mutable_cpu_data();
  Dtype* g = p->mutable_cpu_diff();
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
auto SGDSolver<Dtype>::Rule(int param_id, Dtype rate) {
  Dtype* h = this->history_[param_id]->mutable_cpu_data();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  return [h, lr, momentum](Dtype g, size_t i) {
    h[i] = momentum * h[i] + lr * g;
    return h[i];
  };
}

template <typename Dtype>
void SGDSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
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
void SGDSolver<Dtype>::FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                   const typename Solver<Dtype>::FusedStep& step) {
  fused_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
auto NesterovSolver<Dtype>::Rule(int param_id, Dtype rate) {
  Dtype* h = this->history_[param_id]->mutable_cpu_data();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  return [h, lr, momentum](Dtype g, size_t i) {
    const Dtype previous = h[i];
    h[i] = momentum * h[i] + lr * g;
    return (1 + momentum) * h[i] - momentum * previous;
  };
}

template <typename Dtype>
void NesterovSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
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
void NesterovSolver<Dtype>::FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                        const typename Solver<Dtype>::FusedStep& step) {
  fused_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate));
}

template <typename Dtype>
AdamSolver<Dtype>::AdamSolver(const SolverParameter& param) : Solver<Dtype>(param) {
  STRATA_REQUIRE(this->param_.momentum() >= 0 && this->param_.momentum() < 1)
      << "Adam needs 0 <= momentum (beta1) < 1, got " << this->param_.momentum();
  STRATA_REQUIRE(this->param_.momentum2() >= 0 && this->param_.momentum2() < 1)
      << "Adam needs 0 <= momentum2 (beta2) < 1, got " << this->param_.momentum2();
  // Second moments after the first moments, so the solverstate holds 2 x params history blobs.
  const size_t n = this->history_.size();
  for (size_t i = 0; i < n; ++i) {
    this->history_.push_back(std::make_shared<Blob<Dtype>>(this->history_[i]->shape()));
  }
}

template <typename Dtype>
Dtype AdamSolver<Dtype>::StepSize(int param_id, Dtype rate, int iter) const {
  const Dtype b1 = this->param_.momentum();
  const Dtype b2 = this->param_.momentum2();
  const int t = iter + 1;
  const Dtype correction = std::sqrt(Dtype(1) - std::pow(b2, Dtype(t))) / (Dtype(1) - std::pow(b1, Dtype(t)));
  return rate * this->net_->params_lr()[param_id] * correction;
}

template <typename Dtype>
auto AdamSolver<Dtype>::Rule(int param_id, Dtype rate, int iter) {
  const size_t num_params = this->net_->learnable_params().size();
  Dtype* m = this->history_[param_id]->mutable_cpu_data();
  Dtype* s = this->history_[param_id + num_params]->mutable_cpu_data();
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
void AdamSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
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
void AdamSolver<Dtype>::FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                                    const typename Solver<Dtype>::FusedStep& step) {
  fused_sweep(this->net_->learnable_params()[param_id], begin, end, step, Rule(param_id, rate, iter));
}

STRATA_INSTANTIATE_CLASS(SGDSolver);
STRATA_INSTANTIATE_CLASS(NesterovSolver);
STRATA_INSTANTIATE_CLASS(AdamSolver);
REGISTER_SOLVER_CLASS(SGD);
REGISTER_SOLVER_CLASS(Nesterov);
REGISTER_SOLVER_CLASS(Adam);

}  // namespace strata
