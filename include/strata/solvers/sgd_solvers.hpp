// The gradient-descent family. Each keeps one history blob per learnable parameter (Adam: two).
//   SGD:      v = momentum * v + lr * g;                         w -= v
//   Nesterov: v' = momentum * v + lr * g;                        w -= (1 + momentum) v' - momentum v
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
