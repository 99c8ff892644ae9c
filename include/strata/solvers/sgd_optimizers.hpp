// The gradient-descent family. Each keeps one history blob per learnable parameter (Adam: two).
//   SGD:      v = momentum * v + lr * g;                         w -= v
//   Nesterov: v' = momentum * v + lr * g;                        w -= (1 + momentum) v' - momentum v
//   AdaGrad:  h = h + g^2;                                       w -= lr g / (sqrt(h) + delta)
//   RMSProp:  h = rms_decay h + (1-rms_decay) g^2;               w -= lr g / (sqrt(h) + delta)
//   AdaDelta: h = m h + (1-m) g^2;  u = sqrt((d + delta) / (h + delta)) g;  d = m d + (1-m) u^2;  w -= lr u
//             (m is the solver's momentum, used as the decay rate, as in Caffe)
//   Adam:     m = b1 m + (1-b1) g;  s = b2 s + (1-b2) g^2;       w -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(s) + eps)
// lr here is the policy's rate times the parameter's lr_mult. Each has a one-pass CPU update (OnePassUpdate, run by
// Optimizer::UpdateSlice) that applies the same rule. The loops of these types (SGDSolver, ...) are in
// strata/solver.hpp.
#pragma once

#include "strata/optimizer.hpp"

namespace strata {

template <typename Dtype>
class SGDOptimizer : public Optimizer<Dtype> {
 public:
  SGDOptimizer(const SolverParameter& param, Net<Dtype>* net) : Optimizer<Dtype>(param, net) {}
  const char* rule_type() const override { return "SGD"; }
  bool rule_has_one_pass() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Optimizer<Dtype>::OnePassStep& step) override;

 private:
  // The CPU rule for one param: (g, i) -> step, advancing element i's history.
  auto Rule(int param_id, Dtype rate);
};

template <typename Dtype>
class NesterovOptimizer : public Optimizer<Dtype> {
 public:
  NesterovOptimizer(const SolverParameter& param, Net<Dtype>* net) : Optimizer<Dtype>(param, net) {}
  const char* rule_type() const override { return "Nesterov"; }
  bool rule_has_one_pass() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Optimizer<Dtype>::OnePassStep& step) override;

 private:
  // The CPU rule for one param: (g, i) -> step, advancing element i's history.
  auto Rule(int param_id, Dtype rate);
};

// AdaGrad and RMSProp differ only in how they accumulate g^2: AdaGrad sums it (decay 1, weight 1), RMSProp keeps
// a moving average (decay rms_decay, weight 1 - rms_decay). Neither takes momentum, as in Caffe.
template <typename Dtype>
class AdaptiveRateOptimizer : public Optimizer<Dtype> {
 public:
  bool rule_has_one_pass() const override { return true; }

 protected:
  AdaptiveRateOptimizer(const SolverParameter& param, Net<Dtype>* net, const char* name, Dtype decay, Dtype weight);
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Optimizer<Dtype>::OnePassStep& step) override;

 private:
  auto Rule(int param_id, Dtype rate);
  Dtype decay_, weight_;
};

template <typename Dtype>
class AdaGradOptimizer : public AdaptiveRateOptimizer<Dtype> {
 public:
  AdaGradOptimizer(const SolverParameter& param, Net<Dtype>* net)
      : AdaptiveRateOptimizer<Dtype>(param, net, "AdaGrad", 1, 1) {}
  const char* rule_type() const override { return "AdaGrad"; }
};

template <typename Dtype>
class RMSPropOptimizer : public AdaptiveRateOptimizer<Dtype> {
 public:
  RMSPropOptimizer(const SolverParameter& param, Net<Dtype>* net);
  const char* rule_type() const override { return "RMSProp"; }
};

template <typename Dtype>
class AdaDeltaOptimizer : public Optimizer<Dtype> {
 public:
  AdaDeltaOptimizer(const SolverParameter& param, Net<Dtype>* net);
  const char* rule_type() const override { return "AdaDelta"; }
  bool rule_has_one_pass() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Optimizer<Dtype>::OnePassStep& step) override;

 private:
  auto Rule(int param_id, Dtype rate);
};

template <typename Dtype>
class AdamOptimizer : public Optimizer<Dtype> {
 public:
  AdamOptimizer(const SolverParameter& param, Net<Dtype>* net);
  const char* rule_type() const override { return "Adam"; }
  bool rule_has_one_pass() const override { return true; }

 protected:
  void ComputeUpdateValue(int param_id, Dtype rate, int iter) override;
  void OnePassUpdate(int param_id, size_t begin, size_t end, Dtype rate, int iter,
                   const typename Optimizer<Dtype>::OnePassStep& step) override;

 private:
  // lr x lr_mult x the bias correction sqrt(1 - b2^t) / (1 - b1^t).
  Dtype StepSize(int param_id, Dtype rate, int iter) const;
  auto Rule(int param_id, Dtype rate, int iter);
};

}  // namespace strata
