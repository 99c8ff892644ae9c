// K-FAC: the factors against expectations written out sample by sample (an MLP, and a grouped, padded, strided
// convolution), the preconditioned gradient against the dense (G (x) A + damping)^-1 vec(D) solved in double
// (unsplit) and against the split form's own dense formula, the true Fisher's G against its expectation under
// the model's softmax, the fallback for factors that cannot be inverted, and the errors of a bad kfac_param.
// The data-parallel forms (owners, reduce-scatter, allgather) are checked against one rank in
// tests/mpi/test_data_parallel_engine.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/recompute/executor.hpp"
#include "strata/solvers/kfac_preconditioner.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using Matrix = std::vector<std::vector<double>>;

Matrix Zeros(int rows, int cols) { return Matrix(rows, std::vector<double>(cols, 0.0)); }

// Solves M x = b by Gaussian elimination with partial pivoting.
std::vector<double> Solve(Matrix m, std::vector<double> b) {
  const int n = static_cast<int>(b.size());
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[pivot][c])) pivot = r;
    }
    std::swap(m[c], m[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < n; ++r) {
      const double f = m[r][c] / m[c][c];
      for (int k = c; k < n; ++k) m[r][k] -= f * m[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= m[r][k] * x[k];
    x[r] = s / m[r][r];
  }
  return x;
}

double MaxAbs(const Matrix& m) {
  double v = 0;
  for (const auto& row : m) {
    for (double x : row) v = std::max(v, std::fabs(x));
  }
  return v;
}

void ExpectMatrixNear(const Matrix& expected, const std::vector<double>& actual, double relative,
                      const std::string& what) {
  const int n = static_cast<int>(expected.size());
  ASSERT_EQ(actual.size(), static_cast<size_t>(n) * n) << what;
  const double bound = relative * std::max(1e-12, MaxAbs(expected));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      ASSERT_NEAR(actual[static_cast<size_t>(i) * n + j], expected[i][j], bound) << what << " (" << i << ", " << j << ")";
    }
  }
}

// What one block's check needs, captured after forward and backward and before the update: the factors written
// out from the blobs, and the gradient matrix (rows: outputs, columns: inputs then the bias).
struct Expected {
  Matrix A, G, D;
};

// An inner product's factors: a = [x, 1] per row; per-sample output gradients are rows * dy.
Expected InnerProductExpected(Net<double>& net, const std::string& layer, const std::string& bottom,
                              const std::string& top) {
  const Blob<double>& x = *net.blob_by_name(bottom);
  const Blob<double>& y = *net.blob_by_name(top);
  Layer<double>& l = *net.layer_by_name(layer);
  const int rows = x.shape(0), k = x.count(1), n = y.shape(1);
  Expected e{Zeros(k + 1, k + 1), Zeros(n, n), Zeros(n, k + 1)};
  for (int r = 0; r < rows; ++r) {
    std::vector<double> a(x.cpu_data() + r * k, x.cpu_data() + (r + 1) * k);
    a.push_back(1);
    for (int i = 0; i <= k; ++i) {
      for (int j = 0; j <= k; ++j) e.A[i][j] += a[i] * a[j] / rows;
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        e.G[i][j] += (rows * y.cpu_diff()[r * n + i]) * (rows * y.cpu_diff()[r * n + j]) / rows;
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) e.D[i][j] = l.blobs()[0]->cpu_diff()[i * k + j];
    e.D[i][k] = l.blobs()[1]->cpu_diff()[i];
  }
  return e;
}

// A convolution's factors for one group, from patches read pixel by pixel (no im2col): a = the group's window
// at one output position (zeros in the padding) and a 1, averaged over images and positions; G sums the
// positions' outer products of images * dy and averages over images.
Expected ConvolutionExpected(Net<double>& net, const std::string& layer, const std::string& bottom,
                             const std::string& top, int group, int groups, int kernel, int pad, int stride) {
  const Blob<double>& x = *net.blob_by_name(bottom);
  const Blob<double>& y = *net.blob_by_name(top);
  Layer<double>& l = *net.layer_by_name(layer);
  const int images = x.shape(0), channels = x.shape(1), h = x.shape(2), w = x.shape(3);
  const int outputs = y.shape(1), oh = y.shape(2), ow = y.shape(3);
  const int cg = channels / groups, ng = outputs / groups, k = cg * kernel * kernel;
  Expected e{Zeros(k + 1, k + 1), Zeros(ng, ng), Zeros(ng, k + 1)};
  const double samples = static_cast<double>(images) * oh * ow;
  for (int n = 0; n < images; ++n) {
    for (int p = 0; p < oh; ++p) {
      for (int q = 0; q < ow; ++q) {
        std::vector<double> a;
        for (int c = 0; c < cg; ++c) {
          for (int i = 0; i < kernel; ++i) {
            for (int j = 0; j < kernel; ++j) {
              const int r = p * stride - pad + i, s = q * stride - pad + j;
              a.push_back(r < 0 || r >= h || s < 0 || s >= w ? 0.0 : x.data_at(n, group * cg + c, r, s));
            }
          }
        }
        a.push_back(1);
        for (int i = 0; i <= k; ++i) {
          for (int j = 0; j <= k; ++j) e.A[i][j] += a[i] * a[j] / samples;
        }
        for (int i = 0; i < ng; ++i) {
          for (int j = 0; j < ng; ++j) {
            e.G[i][j] += images * y.diff_at(n, group * ng + i, p, q) * images * y.diff_at(n, group * ng + j, p, q) /
                         images;
          }
        }
      }
    }
  }
  for (int i = 0; i < ng; ++i) {
    for (int j = 0; j < k; ++j) e.D[i][j] = l.blobs()[0]->cpu_diff()[(group * ng + i) * k + j];
    e.D[i][k] = l.blobs()[1]->cpu_diff()[group * ng + i];
  }
  return e;
}

// The dense preconditioned gradient: unsplit (G (x) A + lambda I)^-1 vec(D), or split
// ((G + lambda_G I) (x) (A + lambda_A I))^-1 vec(D), with vec running along D's rows.
Matrix DensePreconditioned(const Expected& e, double damping, bool split) {
  const int g = static_cast<int>(e.G.size()), a = static_cast<int>(e.A.size()), n = g * a;
  double la = 0, lg = 0;
  if (split) {
    double ta = 0, tg = 0;
    for (int i = 0; i < a; ++i) ta += e.A[i][i];
    for (int i = 0; i < g; ++i) tg += e.G[i][i];
    const double pi = std::sqrt((ta / a) / (tg / g));
    la = pi * std::sqrt(damping);
    lg = std::sqrt(damping) / pi;
  }
  Matrix m = Zeros(n, n);
  std::vector<double> d(n);
  for (int i = 0; i < g; ++i) {
    for (int j = 0; j < a; ++j) {
      d[i * a + j] = e.D[i][j];
      for (int k = 0; k < g; ++k) {
        for (int l = 0; l < a; ++l) {
          const double gk = e.G[i][k] + (i == k ? lg : 0), al = e.A[j][l] + (j == l ? la : 0);
          m[i * a + j][k * a + l] = gk * al + (!split && i == k && j == l ? damping : 0);
        }
      }
    }
  }
  const std::vector<double> v = Solve(m, d);
  Matrix out = Zeros(g, a);
  for (int i = 0; i < g; ++i) {
    for (int j = 0; j < a; ++j) out[i][j] = v[i * a + j];
  }
  return out;
}

// The step the update took for a block: with lr 1, no momentum and no weight decay, it is minus the
// preconditioned gradient.
Matrix StepOf(Layer<double>& l, const std::vector<std::vector<double>>& before, int group, int rows, int k) {
  Matrix s = Zeros(rows, k + 1);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < k; ++j) {
      const int idx = (group * rows + i) * k + j;
      s[i][j] = before[0][idx] - l.blobs()[0]->cpu_data()[idx];
    }
    s[i][k] = before[1][group * rows + i] - l.blobs()[1]->cpu_data()[group * rows + i];
  }
  return s;
}

std::vector<std::vector<double>> ParamsOf(Layer<double>& l) {
  std::vector<std::vector<double>> p;
  for (const auto& b : l.blobs()) p.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
  return p;
}

void ExpectStep(const Matrix& expected, const Matrix& step, const std::string& what, double relative = 1e-8) {
  const double bound = relative * std::max(1e-12, MaxAbs(expected));
  for (size_t i = 0; i < expected.size(); ++i) {
    for (size_t j = 0; j < expected[i].size(); ++j) {
      ASSERT_NEAR(step[i][j], expected[i][j], bound) << what << " (" << i << ", " << j << ")";
    }
  }
}

// rows x inputs -> inner product (hidden) -> TanH -> inner product (3) -> SoftmaxWithLoss.
std::string MlpText(int rows, int inputs, int hidden) {
  const std::string r = std::to_string(rows);
  return R"(
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: )" + r + " dim: " + std::to_string(inputs) + " } shape { dim: " + r + R"( } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: )" + std::to_string(hidden) + R"( weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "act" type: "TanH" bottom: "h" top: "t" }
layer { name: "ip2" type: "InnerProduct" bottom: "t" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.8 }
                              bias_filler { type: "constant" value: -0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "l" }
)";
}
const std::string kMlp = MlpText(6, 4, 3);

// Two groups, padding 1 and stride 2 on 5x5 images: 3x3 outputs, windows that overlap the padding.
const char* kConvNet = R"(
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 3 dim: 4 dim: 5 dim: 5 } shape { dim: 3 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 group: 2
                            weight_filler { type: "gaussian" std: 0.4 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "act" type: "TanH" bottom: "c" top: "t" }
layer { name: "ip" type: "InnerProduct" bottom: "t" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.4 }
                              bias_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "l" }
)";

std::unique_ptr<Solver<double>> MakeKfac(const std::string& net, const std::string& kfac_text, int seed = 7) {
  SolverParameter p;
  ReadProtoFromTextString(net, p.mutable_net_param());
  p.set_type("KFAC");
  p.set_base_lr(1);
  p.set_lr_policy("fixed");
  p.set_max_iter(1);
  p.set_random_seed(seed);
  p.set_snapshot_after_train(false);
  ReadProtoFromTextString(kfac_text, p.mutable_kfac_param());
  return SolverRegistry<double>::Create(p);
}

// The K-FAC stage of a "KFAC" solver's optimizer.
KfacPreconditioner<double>& Kfac(Solver<double>& solver) {
  auto* kfac = dynamic_cast<KfacPreconditioner<double>*>(solver.optimizer()->stage());
  CHECK(kfac) << "not a K-FAC solver";
  return *kfac;
}

// Runs one training iteration (Step, so the learning rate is set), calling `capture` once backward is done and
// before the update: the hook after layer 1's backward, the last layer with weights in these nets.
template <typename Fn>
void StepAndCapture(Solver<double>* solver, Fn capture) {
  bool captured = false;
  solver->net()->add_after_backward_hook([&](int layer_id) {
    if (layer_id == 1 && !captured) {
      capture();
      captured = true;
    }
  });
  solver->Step(1);
  ASSERT_TRUE(captured);
}

// One iteration, returning ip1's expectations (input "x", output "h") and its weights before the update.
std::pair<Expected, std::vector<std::vector<double>>> StepCapturingIp1(Solver<double>* solver) {
  Net<double>& net = *solver->net();
  std::pair<Expected, std::vector<std::vector<double>>> captured;
  StepAndCapture(solver, [&] {
    captured.first = InnerProductExpected(net, "ip1", "x", "h");
    captured.second = ParamsOf(*net.layer_by_name("ip1"));
  });
  return captured;
}

void FillInputs(Net<double>& net, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Blob<double>& x = *net.blob_by_name("x");
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = normal(rng);
  Blob<double>& y = *net.blob_by_name("label");
  for (int i = 0; i < y.count(); ++i) y.mutable_cpu_data()[i] = static_cast<double>(rng() % classes);
}

struct DampingCase {
  bool split;
  const char* method;
};

class KfacPreconditioning : public ::testing::TestWithParam<DampingCase> {
 protected:
  std::string KfacText(double damping) const {
    return "fisher: EMPIRICAL kl_clip: 0 damping: " + std::to_string(damping) +
           " split_damping: " + (GetParam().split ? "true" : "false") + " inverse_method: " + GetParam().method;
  }
};

TEST_P(KfacPreconditioning, InnerProductFactorsAndStepMatchTheDenseFormulas) {
  const double damping = 0.05;
  auto solver = MakeKfac(kMlp, KfacText(damping));
  Net<double>& net = *solver->net();
  FillInputs(net, 3, 11);
  Expected ip1, ip2;
  std::vector<std::vector<double>> before1, before2;
  StepAndCapture(solver.get(), [&] {
    ip1 = InnerProductExpected(net, "ip1", "x", "h");
    ip2 = InnerProductExpected(net, "ip2", "t", "s");
    before1 = ParamsOf(*net.layer_by_name("ip1"));
    before2 = ParamsOf(*net.layer_by_name("ip2"));
  });

  ASSERT_EQ(Kfac(*solver).blocks().size(), 2u);
  ExpectMatrixNear(ip1.A, Kfac(*solver).blocks()[0]->A(), 1e-12, "ip1 A");
  ExpectMatrixNear(ip1.G, Kfac(*solver).blocks()[0]->G(), 1e-12, "ip1 G");
  ExpectMatrixNear(ip2.A, Kfac(*solver).blocks()[1]->A(), 1e-12, "ip2 A");
  ExpectMatrixNear(ip2.G, Kfac(*solver).blocks()[1]->G(), 1e-12, "ip2 G");
  ExpectStep(DensePreconditioned(ip1, damping, GetParam().split), StepOf(*net.layer_by_name("ip1"), before1, 0, 3, 4),
             "ip1 step");
  ExpectStep(DensePreconditioned(ip2, damping, GetParam().split), StepOf(*net.layer_by_name("ip2"), before2, 0, 3, 3),
             "ip2 step");
}

TEST_P(KfacPreconditioning, GroupedConvolutionFactorsAndStepMatchTheDenseFormulas) {
  const double damping = 0.02;
  auto solver = MakeKfac(kConvNet, KfacText(damping));
  Net<double>& net = *solver->net();
  FillInputs(net, 3, 12);
  std::vector<Expected> conv;
  Expected ip;
  std::vector<std::vector<double>> conv_before, ip_before;
  StepAndCapture(solver.get(), [&] {
    for (int g = 0; g < 2; ++g) conv.push_back(ConvolutionExpected(net, "conv", "x", "c", g, 2, 3, 1, 2));
    ip = InnerProductExpected(net, "ip", "t", "s");
    conv_before = ParamsOf(*net.layer_by_name("conv"));
    ip_before = ParamsOf(*net.layer_by_name("ip"));
  });

  ASSERT_EQ(Kfac(*solver).blocks().size(), 3u);  // conv group 0, conv group 1, ip
  for (int g = 0; g < 2; ++g) {
    const std::string name = "conv group " + std::to_string(g);
    EXPECT_EQ(Kfac(*solver).blocks()[g]->shape().name, name);
    ExpectMatrixNear(conv[g].A, Kfac(*solver).blocks()[g]->A(), 1e-12, name + " A");
    ExpectMatrixNear(conv[g].G, Kfac(*solver).blocks()[g]->G(), 1e-12, name + " G");
    ExpectStep(DensePreconditioned(conv[g], damping, GetParam().split),
               StepOf(*net.layer_by_name("conv"), conv_before, g, 2, 18), name + " step");
  }
  ExpectMatrixNear(ip.A, Kfac(*solver).blocks()[2]->A(), 1e-12, "ip A");
  ExpectMatrixNear(ip.G, Kfac(*solver).blocks()[2]->G(), 1e-12, "ip G");
  ExpectStep(DensePreconditioned(ip, damping, GetParam().split), StepOf(*net.layer_by_name("ip"), ip_before, 0, 3, 36),
             "ip step");
}

// Two samples into a 20-wide layer of 15 outputs: the product with D costs more than going through dy and x
// (KfacBlock::PreconditionFactored), which the split forms take here on one rank.
TEST_P(KfacPreconditioning, WideInnerProductWithASmallBatchMatchesTheDenseFormula) {
  const std::string net_text = MlpText(2, 20, 15);
  const double damping = 0.03;
  auto solver = MakeKfac(net_text, KfacText(damping));
  Net<double>& net = *solver->net();
  FillInputs(net, 3, 15);
  auto [ip1, before] = StepCapturingIp1(solver.get());
  ASSERT_TRUE(Kfac(*solver).blocks()[0]->FactoredIsCheaper(2));
  // Two samples give A rank 3 in 21 dimensions: the damped system is ill-conditioned, and the dense elimination
  // loses digits the two GEMMs do not.
  ExpectStep(DensePreconditioned(ip1, damping, GetParam().split), StepOf(*net.layer_by_name("ip1"), before, 0, 15, 20),
             "ip1 step", 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Damping, KfacPreconditioning,
                         ::testing::Values(DampingCase{false, "EIGEN"}, DampingCase{true, "EIGEN"},
                                           DampingCase{true, "CHOLESKY"}),
                         [](const auto& info) {
                           return std::string(info.param.split ? "Split" : "Unsplit") + info.param.method;
                         });

// The true Fisher samples labels from the model's softmax: the last layer's per-sample output gradient is
// p - e_y with y ~ p, so G is, in expectation, the mean of diag(p) - p p^T. Its backward must leave the
// iteration's own gradient untouched.
TEST(Kfac, TrueFisherSamplesFromTheModelAndKeepsTheRealGradient) {
  const char* net_text = R"(
layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 4000 dim: 4 } shape { dim: 4000 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.7 }
                              bias_filler { type: "constant" value: 0.2 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "l" }
)";
  auto solver = MakeKfac(net_text, "fisher: TRUE_FISHER kl_clip: 0");
  Net<double>& net = *solver->net();
  FillInputs(net, 3, 13);
  const std::vector<double> labels(net.blob_by_name("label")->cpu_data(), net.blob_by_name("label")->cpu_data() + 4000);
  net.Forward();
  solver->optimizer()->BeforeBackward(0);
  net.Backward();
  const Blob<double>& w = *net.layer_by_name("ip")->blobs()[0];
  const std::vector<double> with_pass(w.cpu_diff(), w.cpu_diff() + w.count());
  EXPECT_EQ(std::vector<double>(net.blob_by_name("label")->cpu_data(), net.blob_by_name("label")->cpu_data() + 4000),
            labels) << "the true labels were not restored";
  net.ClearParamDiffs();
  net.Forward();
  net.Backward();
  EXPECT_EQ(std::vector<double>(w.cpu_diff(), w.cpu_diff() + w.count()), with_pass)
      << "the true-Fisher backward changed the iteration's gradient";

  Matrix expected = Zeros(3, 3);
  const Blob<double>& s = *net.blob_by_name("s");
  for (int r = 0; r < 4000; ++r) {
    double p[3], total = 0;
    for (int c = 0; c < 3; ++c) total += p[c] = std::exp(s.cpu_data()[r * 3 + c]);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) expected[i][j] += ((i == j ? p[i] / total : 0) - p[i] * p[j] / (total * total)) / 4000;
    }
  }
  solver->optimizer()->Apply(0, 0);  // the update of iteration 0, whose factors were collected
  const std::vector<double>& g = Kfac(*solver).blocks()[0]->G();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      // Each entry is a mean of 4,000 terms of at most 1 in size: its standard error is below 0.008.
      EXPECT_NEAR(g[i * 3 + j], expected[i][j], 0.025) << "(" << i << ", " << j << ")";
    }
  }
  // The empirical Fisher, from the data's labels (drawn independently of the model here), is far from this: the
  // bound above tells the two apart.
  Matrix empirical = Zeros(3, 3);
  for (int r = 0; r < 4000; ++r) {
    double p[3], total = 0;
    for (int c = 0; c < 3; ++c) total += p[c] = std::exp(s.cpu_data()[r * 3 + c]);
    for (int c = 0; c < 3; ++c) p[c] = p[c] / total - (c == static_cast<int>(labels[r]) ? 1 : 0);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) empirical[i][j] += p[i] * p[j] / 4000;
    }
  }
  double apart = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) apart = std::max(apart, std::fabs(empirical[i][j] - expected[i][j]));
  }
  EXPECT_GT(apart, 0.05);
}

KfacBlock<double> SmallBlock() {
  KfacBlock<double>::Shape s;
  s.name = "small";
  s.outputs = 2;
  s.inputs = 2;
  s.weight_param = 0;
  return KfacBlock<double>(s, 4096);
}

// A factor with a negative eigenvalue (rounding can make one) is not invertible at the requested damping: the
// block retries with ten times the damping until it is, and never produces a non-finite step.
TEST(Kfac, FactorThatCannotBeInvertedFallsBackToLargerDamping) {
  for (auto method : {KfacParameter::CHOLESKY, KfacParameter::EIGEN}) {
    KfacBlock<double> block = SmallBlock();
    const double packed[] = {1, 0, -1,   // A = diag(1, -1): trace 0, so pi = 1 and lambda_A = sqrt(damping)
                             1, 0, 1};   // G = I
    block.FoldFactors(packed, 1, 0.95);
    block.ComputeInverses(1e-3, true, method);
    ASSERT_TRUE(block.has_inverses());
    EXPECT_NEAR(block.damping(), 10.0, 1e-9) << "the first damping whose square root exceeds 1 is 1e-3 * 10^4";
    const double d[] = {1, 2, 3, 4};
    double v[4];
    block.Precondition(d, v);
    for (double x : v) EXPECT_TRUE(std::isfinite(x));
  }
  // A factor that is not finite at all: no inverse, so the solver passes the plain gradient on.
  KfacBlock<double> block = SmallBlock();
  const double packed[] = {NAN, 0, 1, 1, 0, 1};
  block.FoldFactors(packed, 1, 0.95);
  block.ComputeInverses(1e-3, true, KfacParameter::CHOLESKY);
  EXPECT_FALSE(block.has_inverses());
}

// A block's state round-trips through the solverstate's message (both damping forms, so the eigenvalues too), and
// a state of another block or of other sizes is refused with the file's name.
TEST(Kfac, BlockStateRoundTripsAndRefusesAnotherBlocks) {
  for (bool split : {true, false}) {
    KfacBlock<double> block = SmallBlock();
    const double packed[] = {2, 0.5, 1, 3, 0.25, 1};
    block.FoldFactors(packed, 1, 0.95);
    block.ComputeInverses(1e-2, split, KfacParameter::EIGEN);
    KfacBlockState state;
    block.SaveState(&state);
    KfacBlock<double> again = SmallBlock();
    again.RestoreState(state, "x.solverstate");
    EXPECT_EQ(again.A(), block.A());
    EXPECT_EQ(again.G(), block.G());
    ASSERT_TRUE(again.has_inverses());
    EXPECT_EQ(again.damping(), block.damping());
    const double d[] = {1, -2, 3, 0.5};
    double want[4], got[4];
    block.Precondition(d, want);
    again.Precondition(d, got);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << "split " << split << ", element " << i;
    KfacBlockState renamed = state;
    renamed.set_name("other");
    testing_data::ExpectErrorContaining([&] { SmallBlock().RestoreState(renamed, "x.solverstate"); },
                                        {"x.solverstate", "other"});
    KfacBlockState short_a = state;
    short_a.mutable_a()->RemoveLast();
    testing_data::ExpectErrorContaining([&] { SmallBlock().RestoreState(short_a, "x.solverstate"); },
                                        {"x.solverstate", "small", "factors of 3 and 4 values"});
    KfacBlockState short_inverse = state;
    short_inverse.mutable_g_inverse()->mutable_matrix()->RemoveLast();
    testing_data::ExpectErrorContaining([&] { SmallBlock().RestoreState(short_inverse, "x.solverstate"); },
                                        {"x.solverstate", "an inverse of 3 values"});
  }
}

TEST(Kfac, BadParametersAreRejected) {
  for (const char* bad : {"damping: 0", "damping: -1", "factor_interval: 0", "inverse_interval: -2",
                          "factor_decay: 1", "kl_clip: -0.1", "damping_start: 0 damping_warmup_iters: 10",
                          "max_factor_dim: 0", "inverse_method: CHOLESKY split_damping: false"}) {
    EXPECT_THROW(MakeKfac(kMlp, bad), Error) << bad;
  }
  EXPECT_NO_THROW(MakeKfac(kMlp, "damping: 0.01 factor_interval: 3 inverse_interval: 9"));
}

TEST(Kfac, DampingWarmsUpGeometrically) {
  auto solver = MakeKfac(kMlp, "damping: 0.001 damping_start: 0.1 damping_warmup_iters: 100");
  // The prototxt's floats: relative 1e-6.
  EXPECT_NEAR(Kfac(*solver).DampingAt(0), 0.1, 1e-7);
  EXPECT_NEAR(Kfac(*solver).DampingAt(50), 0.01, 1e-8);
  EXPECT_NEAR(Kfac(*solver).DampingAt(100), 0.001, 1e-9);
  EXPECT_NEAR(Kfac(*solver).DampingAt(1000), 0.001, 1e-9);
}

// A factor wider than max_factor_dim is the identity: ip1's A (5 wide) here, so ip1 is preconditioned by G only.
TEST(Kfac, WideFactorIsTakenAsTheIdentity) {
  const double damping = 0.05;
  auto solver = MakeKfac(kMlp, "fisher: EMPIRICAL kl_clip: 0 split_damping: false max_factor_dim: 4 damping: 0.05");
  Net<double>& net = *solver->net();
  FillInputs(net, 3, 14);
  auto [ip1, before] = StepCapturingIp1(solver.get());
  ASSERT_TRUE(Kfac(*solver).blocks()[0]->a_identity());
  ASSERT_FALSE(Kfac(*solver).blocks()[0]->g_identity());
  ip1.A = Zeros(5, 5);
  for (int i = 0; i < 5; ++i) ip1.A[i][i] = 1;
  ExpectStep(DensePreconditioned(ip1, damping, false), StepOf(*net.layer_by_name("ip1"), before, 0, 3, 4), "ip1 step");
}

// The pipeline planner's measure of K-FAC's work (GradientStage::MeasureLayerCosts): it falls on the layers with
// blocks and on no other, for the empirical Fisher and for the true one (whose factors come from its own backward),
// and the bytes are the blocks' own.
TEST(Kfac, MeasuredLayerCostsFallOnTheBlocksLayers) {
  for (const char* fisher : {"EMPIRICAL", "TRUE_FISHER"}) {
    SCOPED_TRACE(fisher);
    auto solver = MakeKfac(kConvNet, std::string("fisher: ") + fisher + " factor_interval: 2 inverse_interval: 5");
    Net<double>& net = *solver->net();
    FillInputs(net, 3, 15);
    KfacPreconditioner<double>& kfac = Kfac(*solver);
    const auto costs = kfac.MeasureLayerCosts(2);
    const size_t layers = static_cast<size_t>(net.num_layers());
    ASSERT_EQ(costs.per_pass_ms.size(), layers);
    ASSERT_EQ(costs.per_update_ms.size(), layers);
    ASSERT_EQ(costs.bytes.size(), layers);
    std::vector<double> block_bytes(layers, 0), factor_bytes(layers, 0);
    for (const auto& block : kfac.blocks()) {
      const size_t l = static_cast<size_t>(block->shape().layer_id);
      block_bytes[l] += block->state_bytes();
      factor_bytes[l] += sizeof(double) * (block->A().size() + block->G().size());
      EXPECT_TRUE(block->has_inverses()) << block->shape().name;
    }
    for (size_t l = 0; l < layers; ++l) {
      const std::string& name = net.layer_names()[l];
      SCOPED_TRACE(name);
      const bool has_blocks = name == "conv" || name == "ip";
      EXPECT_EQ(costs.per_pass_ms[l] > 0, has_blocks);
      EXPECT_EQ(costs.per_update_ms[l] > 0, has_blocks);
      EXPECT_EQ(costs.bytes[l], block_bytes[l]);
      // The running factors (double), fresh factors and inverses (Dtype): at least the first.
      EXPECT_EQ(factor_bytes[l] > 0, has_blocks);
      EXPECT_GE(costs.bytes[l], factor_bytes[l]);
    }
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// 64 x 30 -> five inner products with TanH between them -> SoftmaxWithLoss: a chain the sqrt planner cuts into
// segments it recomputes.
const std::string kDeepMlp = [] {
  std::string text = R"(
layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 64 dim: 30 } shape { dim: 64 } } })";
  std::string below = "x";
  for (int k = 1; k <= 5; ++k) {
    const std::string ip = "ip" + std::to_string(k), t = "t" + std::to_string(k);
    text += "\nlayer { name: '" + ip + "' type: 'InnerProduct' bottom: '" + below + "' top: '" + ip +
            "' inner_product_param { num_output: " + (k < 5 ? "40" : "3") +
            " weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.1 } } }";
    if (k < 5) text += "\nlayer { name: 'act" + std::to_string(k) + "' type: 'TanH' bottom: '" + ip + "' top: '" + t + "' }";
    below = k < 5 ? t : ip;
  }
  return text + "\nlayer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip5' bottom: 'label' top: 'l' }\n";
}();

// Under a recompute plan, or with blobs freed after use, the factors come from the real forward and backward (the
// hooks fire once, from them), the true Fisher's from its backward, which frees only what the real one recomputes
// (Net::BackwardKeepingValues), and the gradient is preconditioned as D: the weights follow the same path as with
// every blob kept.
TEST(Kfac, RecomputePlanAndFreedBlobsGiveTheSameWeights) {
  for (const char* fisher : {"EMPIRICAL", "TRUE_FISHER"}) {
    std::vector<std::vector<double>> weights[3];
    size_t peaks[3] = {0, 0, 0};  // activation bytes
    for (int memory = 0; memory < 3; ++memory) {  // every blob kept, a recompute plan, FREE_AFTER_USE
      SCOPED_TRACE(std::string(fisher) + ", memory " + std::to_string(memory));
      SolverParameter p;
      ReadProtoFromTextString(kDeepMlp, p.mutable_net_param());
      p.set_type("KFAC");
      p.set_base_lr(0.1f);
      p.set_momentum(0.9f);
      p.set_lr_policy("fixed");
      p.set_random_seed(3);
      ReadProtoFromTextString(std::string("factor_interval: 2 inverse_interval: 2 fisher: ") + fisher,
                              p.mutable_kfac_param());
      if (memory == 1) ReadProtoFromTextString("planner: \"sqrt\"", p.mutable_recompute_param());
      if (memory == 2) p.set_blob_lifetime(SolverParameter::FREE_AFTER_USE);
      auto solver = SolverRegistry<double>::Create(p);
      ASSERT_EQ(solver->net()->pass_runner() != nullptr, memory > 0);
      if (memory == 1) {
        const auto* executor = dynamic_cast<const RecomputeExecutor<double>*>(solver->net()->pass_runner());
        ASSERT_NE(executor, nullptr);
        bool recomputes = false;
        for (const auto& layers : executor->schedule().recompute_layers) recomputes = recomputes || !layers.empty();
        ASSERT_TRUE(recomputes) << "the plan recomputes nothing: the test would prove nothing";
      }
      FillInputs(*solver->net(), 3, 16);
      MemoryTracker::reset_peak(MemoryCategory::kActivation);
      solver->Step(4);
      peaks[memory] = MemoryTracker::peak(MemoryCategory::kActivation);
      for (const char* name : {"ip1", "ip3", "ip5"}) {
        for (const auto& w : ParamsOf(*solver->net()->layer_by_name(name))) weights[memory].push_back(w);
      }
    }
    std::printf("[kfac-memory] %s: activation peak %zu B kept, %zu B planned, %zu B freed after use\n", fisher,
                peaks[0], peaks[1], peaks[2]);
    // Both under 0.5 of every blob kept, the true Fisher's too (0.47 and 0.41 measured): its backward frees the
    // gradients and what the real backward recomputes.
    EXPECT_LT(peaks[1], 0.55 * peaks[0]);
    EXPECT_LT(peaks[2], 0.55 * peaks[0]);
    for (int memory = 1; memory < 3; ++memory) {
      ASSERT_EQ(weights[0].size(), weights[memory].size());
      for (size_t i = 0; i < weights[0].size(); ++i) {
        for (size_t k = 0; k < weights[0][i].size(); ++k) {
          ASSERT_NEAR(weights[memory][i][k], weights[0][i][k], 1e-10 * (1 + std::fabs(weights[0][i][k])))
              << fisher << ", memory " << memory << ": " << i << ", " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata
