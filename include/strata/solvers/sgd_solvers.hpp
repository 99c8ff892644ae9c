// The gradient-descent family. Each keeps one history blob per learnable parameter (Adam: two).
//   SGD:      v = momentum * v + lr * g;                         w -= v
//   Nesterov: v' = momentum * v + lr * g;                        w -= (1 + momentum) v' - momentum v
//   AdaGrad:  h = h + g^2;                                       w -= lr g / (sqrt(h) + delta)
//   RMSProp:  h = rms_decay h + (1-rms_decay) g^2;               w -= lr g / (sqrt(h) + delta)
//   AdaDelta: h = m h + (1-m) g^2;  u = sqrt((d + delta) / (h + delta)) g;  d = m d + (1-m) u^2;  w -= lr u
//             (m is the solver's momentum, used as the decay rate, as in Caffe)
//   Adam:     m = b1 m + (1-b1) g;  s = b2 s + (1-b2) g^2;       w -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(s) + eps)
// lr here is the policy's rate times the parameter's lr_mult. Each has a one-pass CPU update (Solver::UpdateSlice)
// that applies the same rule.
#pragma once

#include "strata/solver.hpp"

namespace strata {

template <typename Dtype>
class SGDSolver : public Solver<Dtype> {
 public:
  explicit SGDSolver(const SolverParameter& param) : Solver<Dtype>(param) {}
  const char* type() const override { return "SGD"; }
  bool has_fused_update() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Solver<Dtype>::FusedStep& step) override;

 private:
  // The CPU rule for one param: (g, i) -> step, advancing element i's history.
  auto Rule(int param_id, Dtype rate);
};

template <typename Dtype>
class NesterovSolver : public Solver<Dtype> {
 public:
  explicit NesterovSolver(const SolverParameter& param) : Solver<Dtype>(param) {}
  const char* type() const override { return "Nesterov"; }
  bool has_fused_update() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Solver<Dtype>::FusedStep& step) override;

 private:
  // The CPU rule for one param: (g, i) -> step, advancing element i's history.
  auto Rule(int param_id, Dtype rate);
};

// AdaGrad and RMSProp differ only in how they accumulate g^2: AdaGrad sums it (decay 1, weight 1), RMSProp keeps
// a moving average (decay rms_decay, weight 1 - rms_decay). Neither takes momentum, as in Caffe.
template <typename Dtype>
class AdaptiveRateSolver : public Solver<Dtype> {
 public:
  bool has_fused_update() const override { return true; }

 protected:
  AdaptiveRateSolver(const SolverParameter& param, const char* name, Dtype decay, Dtype weight);
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Solver<Dtype>::FusedStep& step) override;

 private:
  auto Rule(int param_id, Dtype rate);
  Dtype decay_, weight_;
};

template <typename Dtype>
class AdaGradSolver : public AdaptiveRateSolver<Dtype> {
 public:
  explicit AdaGradSolver(const SolverParameter& param) : AdaptiveRateSolver<Dtype>(param, "AdaGrad", 1, 1) {}
  const char* type() const override { return "AdaGrad"; }
};

template <typename Dtype>
class RMSPropSolver : public AdaptiveRateSolver<Dtype> {
 public:
  explicit RMSPropSolver(const SolverParameter& param);
  const char* type() const override { return "RMSProp"; }
};

template <typename Dtype>
class AdaDeltaSolver : public Solver<Dtype> {
 public:
  explicit AdaDeltaSolver(const SolverParameter& param);
  const char* type() const override { return "AdaDelta"; }
  bool has_fused_update() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Solver<Dtype>::FusedStep& step) override;

 private:
  auto Rule(int param_id, Dtype rate);
};

template <typename Dtype>
class AdamSolver : public Solver<Dtype> {
 public:
  explicit AdamSolver(const SolverParameter& param);
  const char* type() const override { return "Adam"; }
  bool has_fused_update() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void FusedUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Solver<Dtype>::FusedStep& step) override;

 private:
  // lr x lr_mult x the bias correction sqrt(1 - b2^t) / (1 - b1^t).
  Dtype StepSize(int param_id, Dtype rate, int iter) const;
  auto Rule(int param_id, Dtype rate, int iter);
};

}  // namespace strata
