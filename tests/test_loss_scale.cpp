// Loss scaling (solver loss_scale; docs/caffe.md, "Loss scaling"): a power-of-two scale trains bit for bit as the
// unscaled run, whatever the rule, clipping, iter_size or K-FAC; a dynamic scale skips an iteration whose gradient
// (or K-FAC's factors) is not finite without touching a weight, a history or a factor, grows after its interval,
// resumes where it stood, and stops the run at its least scale; bad settings are refused before the first
// iteration.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/solver.hpp"
#include "strata/solvers/kfac_preconditioner.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

const char* kNet = R"(
name: "scaled"
layer { name: "in" type: "Input" top: "x" top: "t"
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "fc2" type: "InnerProduct" bottom: "h" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "l" }
)";

SolverParameter MakeSolver(const std::string& extra, const char* net = kNet,
                           const std::string& rate = "base_lr: 0.05 lr_policy: 'inv' gamma: 0.1 power: 0.75") {
  SolverParameter p;
  ReadProtoFromTextString(rate + " random_seed: 7 max_iter: 6 " + extra, &p);
  ReadProtoFromTextString(net, p.mutable_net_param());
  p.set_snapshot_after_train(false);
  return p;
}

std::unique_ptr<Solver<float>> Make(const SolverParameter& p) {
  auto s = SolverRegistry<float>::Create(p);
  Net<float>& net = *s->net();
  float* x = net.blob_by_name("x")->mutable_cpu_data();
  for (int i = 0; i < net.blob_by_name("x")->count(); ++i) x[i] = 0.1f * static_cast<float>(i - 5);
  float* t = net.blob_by_name("t")->mutable_cpu_data();
  for (int i = 0; i < net.blob_by_name("t")->count(); ++i) t[i] = 0.3f * static_cast<float>(i % 3) - 0.2f;
  return s;
}

std::vector<float> Weights(Solver<float>& s) {
  std::vector<float> w;
  for (Blob<float>* p : s.net()->learnable_params()) w.insert(w.end(), p->cpu_data(), p->cpu_data() + p->count());
  return w;
}

float ForwardLoss(Solver<float>& s) {
  float loss = 0;
  s.net()->Forward(&loss);
  return loss;
}

TEST(LossScale, APowerOfTwoTrainsBitForBitAsUnscaled) {
  const std::vector<std::string> rules = {"type: 'SGD' momentum: 0.9 weight_decay: 0.01",
                                          "type: 'SGD' momentum: 0.9 regularization_type: 'L1' weight_decay: 0.01",
                                          "type: 'Nesterov' momentum: 0.8", "type: 'Adam' momentum: 0.9",
                                          "type: 'AdaGrad'", "type: 'SGD' clip_gradients: 0.1",
                                          "type: 'SGD' momentum: 0.9 iter_size: 2"};
  const std::vector<std::string> scales = {"loss_scale { scale: 1024 }",
                                           "loss_scale { scale: 0.125 }",
                                           "loss_scale { scale: 4096 dynamic: true growth_interval: 2 }"};
  for (const std::string& rule : rules) {
    auto plain = Make(MakeSolver(rule));
    plain->Step(6);
    const std::vector<float> want = Weights(*plain);
    for (const std::string& scale : scales) {
      SCOPED_TRACE(rule + " " + scale);
      auto scaled = Make(MakeSolver(rule + " " + scale));
      scaled->Step(6);
      EXPECT_EQ(Weights(*scaled), want);
      EXPECT_EQ(ForwardLoss(*scaled), ForwardLoss(*plain));  // Forward's loss is unscaled
      EXPECT_EQ(scaled->optimizer()->skipped_iterations(), 0);
    }
  }
  auto grown = Make(MakeSolver(scales[2]));
  grown->Step(6);
  EXPECT_EQ(grown->optimizer()->loss_scale(), 4096.0 * 8);  // doubled after iterations 2, 4 and 6
}

// y = 0.5 x0 with x = (1e15, 0): the loss (1.25e29) is finite in float, the first weight's gradient (5e29 times the
// scale) is not from a scale of 2^30 on.
const char* kHugeNet = R"(
name: "huge"
layer { name: "in" type: "Input" top: "x" top: "t" input_param { shape { dim: 1 dim: 2 } shape { dim: 1 dim: 1 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 1 bias_term: false weight_filler { type: "constant" value: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "l" }
)";

std::unique_ptr<Solver<float>> MakeHuge(const std::string& scale) {
  auto s = SolverRegistry<float>::Create(
      MakeSolver("type: 'SGD' momentum: 0.9 display: 1 " + scale, kHugeNet, "base_lr: 1e-31 lr_policy: 'fixed'"));
  float* x = s->net()->blob_by_name("x")->mutable_cpu_data();
  x[0] = 1e15f;
  x[1] = 0;
  s->net()->blob_by_name("t")->mutable_cpu_data()[0] = 0;
  return s;
}

// The log's lines while it lives, at every severity.
class LogLines : public google::LogSink {
 public:
  LogLines() : level_(FLAGS_minloglevel) {
    FLAGS_minloglevel = 0;
    google::AddLogSink(this);
  }
  ~LogLines() override {
    google::RemoveLogSink(this);
    FLAGS_minloglevel = level_;
  }
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*, const char* message,
            size_t length) override {
    std::lock_guard<std::mutex> lock(mutex_);
    text_.append(message, length).append("\n");
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  int level_;
  std::mutex mutex_;
  std::string text_;
};

TEST(LossScale, ANonFiniteGradientSkipsTheIterationAndLowersTheScale) {
  LogLines log;
  const double two31 = std::ldexp(1.0, 31);
  auto skipping = MakeHuge("loss_scale { scale: 2147483648 dynamic: true }");  // 2^31
  const std::vector<float> start = Weights(*skipping);
  for (int k = 1; k <= 2; ++k) {
    skipping->Step(1);
    EXPECT_EQ(Weights(*skipping), start) << "iteration " << k << " was not skipped";
    EXPECT_EQ(skipping->optimizer()->skipped_iterations(), k);
    EXPECT_EQ(skipping->optimizer()->loss_scale(), two31 / (1 << k));
    EXPECT_EQ(skipping->iter(), k);  // a skipped iteration still counts (its batch is read, the rate moves on)
  }
  // From 2^29 on the gradient is finite: the two steps equal those of a run that began there, so the skipped
  // iterations left the momentum history as untouched as the weights.
  skipping->Step(2);
  auto direct = MakeHuge("loss_scale { scale: 536870912 dynamic: true }");  // 2^29
  direct->Step(2);
  EXPECT_EQ(direct->optimizer()->skipped_iterations(), 0);
  EXPECT_NE(Weights(*direct), start);
  EXPECT_EQ(Weights(*skipping), Weights(*direct));
  EXPECT_EQ(skipping->optimizer()->skipped_iterations(), 2);
  const std::string text = log.text();
  EXPECT_NE(text.find("Iteration 1: the gradient is not finite at loss scale 1.07374e+09; the step is skipped and "
                      "the scale lowered to 5.36871e+08"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("loss scale = 5.36871e+08 (2 iterations skipped so far)"), std::string::npos) << text;
}

TEST(LossScale, ANonFiniteGradientAtTheLeastScaleStopsTheRun) {
  auto s = MakeHuge("loss_scale { scale: 2147483648 dynamic: true min_scale: 1073741824 }");  // 2^31, 2^30
  s->Step(1);  // skipped: the scale is now the least
  testing_data::ExpectErrorContaining([&] { s->Step(1); }, {"not finite at iteration 1", "min_scale"});
}

TEST(LossScale, ADynamicScaleResumesWhereItStood) {
  testing_data::TempDir dir;
  // Grows after iterations 4 and 8. A resumed run that forgot how many finite iterations it had counted at 5
  // would grow only at 9.
  auto make = [&](int max_iter) {
    SolverParameter p = MakeSolver("type: 'SGD' momentum: 0.9 loss_scale { scale: 1024 dynamic: true "
                                   "growth_interval: 4 }");
    p.set_max_iter(max_iter);
    p.set_snapshot_prefix(dir / "ls");
    p.set_snapshot_after_train(true);
    return Make(p);
  };
  auto straight = make(8);
  straight->Solve();
  auto first = make(5);
  first->Solve();  // snapshots at the end
  auto resumed = make(8);
  resumed->Solve(dir / "ls_iter_5.solverstate");
  EXPECT_EQ(straight->optimizer()->loss_scale(), 4096);
  EXPECT_EQ(resumed->optimizer()->loss_scale(), 4096);
  EXPECT_EQ(Weights(*resumed), Weights(*straight));
}

// Wider than the batch: fc1's gradient is preconditioned through its factors x and dy (KfacBlock::
// PreconditionFactored) under split damping, through D under the unsplit form.
const char* kKfacNet = R"(
name: "kfac_scaled"
layer { name: "in" type: "Input" top: "x" top: "t"
        input_param { shape { dim: 4 dim: 7 } shape { dim: 4 dim: 2 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 32 weight_filler { type: "gaussian" std: 0.3 }
                              bias_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "fc2" type: "InnerProduct" bottom: "h" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "l" }
)";

KfacPreconditioner<float>& Kfac(Solver<float>& s) {
  auto* kfac = dynamic_cast<KfacPreconditioner<float>*>(s.optimizer()->stage());
  CHECK(kfac) << "not a K-FAC solver";
  return *kfac;
}

std::vector<double> RunningFactors(Solver<float>& s) {
  std::vector<double> f;
  for (const auto& block : Kfac(s).blocks()) {
    f.insert(f.end(), block->A().begin(), block->A().end());
    f.insert(f.end(), block->G().begin(), block->G().end());
  }
  return f;
}

// K-FAC's factors are made of the output gradients, which carry the scale: it divides it out of them (and of the
// factored form's dy), so a power of two trains bit for bit as the unscaled run.
TEST(LossScale, KfacWithAPowerOfTwoTrainsBitForBitAsUnscaled) {
  const std::string kfac = "type: 'KFAC' momentum: 0.9 weight_decay: 0.001 kfac_param { fisher: EMPIRICAL "
                           "damping: 0.01 factor_decay: 0.9 inverse_interval: 2 ";
  const std::vector<std::string> forms = {kfac + "}", kfac + "split_damping: false }",
                                          kfac + "kl_clip: 0.001 inverse_method: CHOLESKY }"};
  const std::vector<std::string> scales = {"loss_scale { scale: 1024 }", "loss_scale { scale: 0.125 }",
                                           "loss_scale { scale: 4096 dynamic: true growth_interval: 2 }"};
  for (const std::string& form : forms) {
    auto plain = Make(MakeSolver(form, kKfacNet));
    plain->Step(6);
    const std::vector<float> want = Weights(*plain);
    EXPECT_NE(Weights(*Make(MakeSolver(form, kKfacNet))), want) << "the weights did not move";
    for (const std::string& scale : scales) {
      SCOPED_TRACE(form + " " + scale);
      auto scaled = Make(MakeSolver(form + " " + scale, kKfacNet));
      scaled->Step(6);
      EXPECT_EQ(Weights(*scaled), want);
      EXPECT_EQ(RunningFactors(*scaled), RunningFactors(*plain));
      EXPECT_EQ(scaled->optimizer()->skipped_iterations(), 0);
    }
  }
  ASSERT_TRUE(Kfac(*Make(MakeSolver(forms[0], kKfacNet))).blocks()[0]->FactoredIsCheaper(4));
}

// y = 0.5 x0 with t = y: with x0 = 2e19 the loss and the gradient are 0, and K-FAC's A (x0^2) is infinite in
// float at any loss scale; with x = (1, 0.5) and t = 0.3 every value is finite.
std::unique_ptr<Solver<float>> MakeKfacOnHuge(const std::string& scale) {
  return SolverRegistry<float>::Create(MakeSolver(
      "type: 'KFAC' momentum: 0.9 display: 1 kfac_param { fisher: EMPIRICAL factor_interval: 1 inverse_interval: 1 "
      "damping: 0.01 } " + scale, kHugeNet, "base_lr: 0.1 lr_policy: 'fixed'"));
}

void SetInput(Solver<float>& s, bool huge) {
  float* x = s.net()->blob_by_name("x")->mutable_cpu_data();
  x[0] = huge ? 2e19f : 1.f;
  x[1] = huge ? 0.f : 0.5f;
  s.net()->blob_by_name("t")->mutable_cpu_data()[0] = huge ? 0.5f * x[0] : 0.3f;
}

TEST(LossScale, KfacFactorsNotFiniteSkipTheIterationAndLowerTheScale) {
  LogLines log;
  auto skipping = MakeKfacOnHuge("loss_scale { scale: 64 dynamic: true }");
  SetInput(*skipping, true);
  const std::vector<float> start = Weights(*skipping);
  for (int k = 1; k <= 2; ++k) {
    skipping->Step(1);
    EXPECT_EQ(skipping->optimizer()->skipped_iterations(), k);
    EXPECT_EQ(skipping->optimizer()->loss_scale(), 64 >> k);
    EXPECT_FALSE(Kfac(*skipping).blocks()[0]->has_factors()) << "a skipped iteration's factors were folded in";
  }
  // The skipped iterations left no trace: two finite steps from here equal a run's that began at 16 with them.
  SetInput(*skipping, false);
  skipping->Step(2);
  auto direct = MakeKfacOnHuge("loss_scale { scale: 16 dynamic: true }");
  SetInput(*direct, false);
  direct->Step(2);
  EXPECT_EQ(direct->optimizer()->skipped_iterations(), 0);
  EXPECT_NE(Weights(*direct), start);
  EXPECT_EQ(RunningFactors(*skipping), RunningFactors(*direct));
  EXPECT_EQ(Weights(*skipping), Weights(*direct));
  EXPECT_NE(log.text().find("Iteration 0: a statistic of the KFAC stage is not finite at loss scale 64; the step is "
                            "skipped and the scale lowered to 32"),
            std::string::npos)
      << log.text();
  // Not finite at the least scale: a smaller one would not help (A is not scaled), so the run stops.
  auto stopping = MakeKfacOnHuge("loss_scale { scale: 64 dynamic: true min_scale: 32 }");
  SetInput(*stopping, true);
  stopping->Step(1);
  testing_data::ExpectErrorContaining([&] { stopping->Step(1); },
                                      {"a statistic of the KFAC stage is not finite at iteration 1", "min_scale"});
}

// A static scale (or none) cannot be lowered: the step goes on with the running factors kept (none yet: the plain
// gradient), never with an inf folded into them.
TEST(LossScale, KfacFactorsNotFiniteUnderAStaticScaleKeepTheRunningOnes) {
  for (const std::string scale : {"loss_scale { scale: 64 }", ""}) {
    SCOPED_TRACE(scale);
    LogLines log;
    auto s = MakeKfacOnHuge(scale);
    SetInput(*s, true);
    s->Step(2);
    EXPECT_FALSE(Kfac(*s).blocks()[0]->has_factors());
    EXPECT_NE(log.text().find("K-FAC: iteration 1's factors are not finite; the running factors are kept"),
              std::string::npos)
        << log.text();
    SetInput(*s, false);
    s->Step(1);
    ASSERT_TRUE(Kfac(*s).blocks()[0]->has_factors());
    for (double f : RunningFactors(*s)) EXPECT_TRUE(std::isfinite(f));
  }
}

TEST(LossScale, BadSettingsAreRefusedBeforeTraining) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"loss_scale { scale: 0 }", {"loss_scale.scale", "positive"}},
      {"loss_scale { scale: -2 dynamic: true }", {"loss_scale.scale", "positive"}},
      {"loss_scale { scale: 8 dynamic: true growth_factor: 1 }", {"loss_scale.growth_factor"}},
      {"loss_scale { scale: 8 dynamic: true backoff_factor: 1 }", {"loss_scale.backoff_factor"}},
      {"loss_scale { scale: 8 dynamic: true backoff_factor: 0 }", {"loss_scale.backoff_factor"}},
      {"loss_scale { scale: 8 dynamic: true growth_interval: 0 }", {"loss_scale.growth_interval"}},
      {"loss_scale { scale: 8 dynamic: true min_scale: 16 }", {"loss_scale.min_scale", "at most"}},
      {"loss_scale { scale: inf }", {"loss_scale.scale"}},
      {"loss_scale { scale: 1e-40 }", {"loss_scale.scale", "reciprocal"}},
      {"loss_scale { scale: 8 dynamic: true min_scale: 1e-40 }", {"loss_scale.min_scale", "reciprocal"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.first);
    testing_data::ExpectErrorContaining([&] { Make(MakeSolver(c.first)); }, c.second);
  }
}

}  // namespace
}  // namespace strata
