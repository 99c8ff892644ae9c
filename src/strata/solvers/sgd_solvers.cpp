#include "strata/solvers/sgd_solvers.hpp"

#include <cmath>

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

template <typename Dtype>
void SGDSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
  Blob<Dtype>* v = this->history_[param_id].get();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  const int n = p->count();
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    sgd_update_gpu(n, p->mutable_gpu_diff(), v->mutable_gpu_data(), momentum, lr);
    return;
  }
#endif
  const Dtype* g = p->cpu_diff();
  Dtype* h = v->mutable_cpu_data();
  Dtype* step = p->mutable_cpu_diff();
  for (int i = 0; i < n; ++i) {
    h[i] = momentum * h[i] + lr * g[i];
    step[i] = h[i];
  }
}

template <typename Dtype>
void NesterovSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
  Blob<Dtype>* v = this->history_[param_id].get();
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype momentum = this->param_.momentum();
  const int n = p->count();
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    nesterov_update_gpu(n, p->mutable_gpu_diff(), v->mutable_gpu_data(), momentum, lr);
    return;
  }
#endif
  Dtype* h = v->mutable_cpu_data();
  Dtype* g = p->mutable_cpu_diff();
  for (int i = 0; i < n; ++i) {
    const Dtype previous = h[i];
    h[i] = momentum * h[i] + lr * g[i];
    g[i] = (1 + momentum) * h[i] - momentum * previous;
  }
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
void AdamSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate, int iter) {
  const size_t num_params = this->net_->learnable_params().size();
  Blob<Dtype>* p = this->net_->learnable_params()[param_id];
  const Dtype lr = rate * this->net_->params_lr()[param_id];
  const Dtype b1 = this->param_.momentum();
  const Dtype b2 = this->param_.momentum2();
  const Dtype eps = this->param_.delta();
  const int t = iter + 1;
  const Dtype correction = std::sqrt(Dtype(1) - std::pow(b2, Dtype(t))) / (Dtype(1) - std::pow(b1, Dtype(t)));
  const int n = p->count();
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    adam_update_gpu(n, p->mutable_gpu_diff(), this->history_[param_id]->mutable_gpu_data(),
                    this->history_[param_id + num_params]->mutable_gpu_data(), b1, b2, eps, lr * correction);
    return;
  }
#endif
  Dtype* m = this->history_[param_id]->mutable_cpu_data();
  Dtype* s = this->history_[param_id + num_params]->mutable_cpu_data();
  Dtype* g = p->mutable_cpu_diff();
  for (int i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    s[i] = b2 * s[i] + (1 - b2) * g[i] * g[i];
    g[i] = lr * correction * m[i] / (std::sqrt(s[i]) + eps);
  }
}

STRATA_INSTANTIATE_CLASS(SGDSolver);
STRATA_INSTANTIATE_CLASS(NesterovSolver);
STRATA_INSTANTIATE_CLASS(AdamSolver);
REGISTER_SOLVER_CLASS(SGD);
REGISTER_SOLVER_CLASS(Nesterov);
REGISTER_SOLVER_CLASS(Adam);

}  // namespace strata
