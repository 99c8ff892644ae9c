// K-FAC on the GPU (docs/kfac.md, "On the GPU"): each of the block's device operations (src/strata/solvers/
// kfac_math.hpp), the cuSOLVER inversions among them, against its CPU version on random data, and whole K-FAC
// training steps on the GPU against the same steps on the CPU: the running factors, the weights and the losses,
// over the damping forms, an identity side, the factored inner-product form, TRUE_FISHER and grouped convolutions.
// In double the two devices differ only in the order of their sums (bound 1e-9); in float (TF32 off) the bound is
// 1e-4, a Convolution's. The weights and their gradients must never have been copied to the host. Without a GPU
// each test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "strata/solver.hpp"
#include "strata/solvers/kfac_math.hpp"
#include "strata/solvers/kfac_preconditioner.hpp"
#include "strata/syncedmem.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

class GpuTestKfac : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoGpu(); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override { Strata::set_mode(Strata::CPU); }
};

template <typename Dtype>
double RelativeError(const Dtype* got, const Dtype* want, int n) {
  double diff = 0, ref = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(static_cast<double>(got[i])) != std::isnan(static_cast<double>(want[i]))) return INFINITY;
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    ref += static_cast<double>(want[i]) * want[i];
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

#ifdef STRATA_USE_CUDA
// One operation on both devices: `run(math, inputs, output)` with the inputs' pointers on that device, then the
// outputs compared (they start equal, as some operations update in place).
template <typename Dtype, typename Run>
void ExpectSameOnBothDevices(const std::string& what, const std::vector<std::vector<Dtype>>& inputs, int out_size,
                             Run run, double bound) {
  SCOPED_TRACE(what);
  std::vector<std::unique_ptr<Blob<Dtype>>> in[2];
  Blob<Dtype> out[2];
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Dtype> start(out_size);
  for (Dtype& v : start) v = static_cast<Dtype>(u(gen));
  for (int d = 0; d < 2; ++d) {
    for (const auto& values : inputs) {
      in[d].emplace_back(new Blob<Dtype>({std::max<int>(1, static_cast<int>(values.size()))}));
      std::copy(values.begin(), values.end(), in[d].back()->mutable_cpu_data());
    }
    out[d].Reshape({std::max(1, out_size)});
    std::copy(start.begin(), start.end(), out[d].mutable_cpu_data());
  }
  const auto pointers = [&](int d, auto m) {
    std::vector<const Dtype*> p;
    for (const auto& b : in[d]) p.push_back(m.data(*b));
    return p;
  };
  run(CpuKfacMath<Dtype>(), pointers(0, CpuKfacMath<Dtype>()), out[0].mutable_cpu_data());
  run(GpuKfacMath<Dtype>(), pointers(1, GpuKfacMath<Dtype>()), out[1].mutable_gpu_data());
  const double err = RelativeError(out[1].cpu_data(), out[0].cpu_data(), out_size);
  EXPECT_LE(err, bound);
  std::printf("[gpu-kfac] %s: normalised error %.3g\n", what.c_str(), err);
}

template <typename Dtype>
std::vector<Dtype> Random(int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Dtype> v(n);
  for (Dtype& x : v) x = static_cast<Dtype>(u(gen));
  return v;
}

template <typename Dtype>
void CheckOperations() {
  using Cpu = CpuKfacMath<Dtype>;
  // Data movement is exact; products and quotients may differ in the last bit.
  const double exact = 0, rounding = std::is_same<Dtype, float>::value ? 1e-6 : 1e-14;
  ConvGeometry g;
  g.channels = 3, g.height = 7, g.width = 6, g.kernel_h = 3, g.kernel_w = 2, g.pad_h = 1, g.pad_w = 0;
  g.stride_h = 2, g.stride_w = 1, g.dilation_h = 1, g.dilation_w = 2;
  const int images = 3, image_size = g.channels * g.height * g.width;
  ExpectSameOnBothDevices<Dtype>("im2col of 3 images", {Random<Dtype>(images * image_size, 1)},
                                 g.col_rows() * g.out_count() * images,
                                 [&](auto m, auto in, Dtype* out) { m.im2col(in[0], g, images, out); }, exact);
  // 4 images of 5 channels x 6 positions; rows 2..4 of each.
  ExpectSameOnBothDevices<Dtype>("gather_images", {Random<Dtype>(4 * 5 * 6, 2)}, 3 * 4 * 6,
                                 [&](auto m, auto in, Dtype* out) { m.gather_images(4, 3, 6, in[0] + 2 * 6, 30, out); },
                                 exact);
  for (bool sum : {false, true}) {
    const int k = 9, d = sum ? k + 1 : k;
    ExpectSameOnBothDevices<Dtype>(sum ? "pack_upper with a sum" : "pack_upper",
                                   {Random<Dtype>(k * k, 3), Random<Dtype>(k, 4)}, d * (d + 1) / 2,
                                   [&](auto m, auto in, Dtype* out) {
                                     m.pack_upper(k, in[0], sum ? in[1] : nullptr, Dtype(0.25), out);
                                   },
                                   exact);
  }
  for (bool transposed : {false, true}) {
    for (bool bias : {false, true}) {
      const int rows = 7, k = 11, cols = bias ? k + 1 : k;
      const std::string form = std::string(transposed ? "transposed" : "plain") + (bias ? ", bias" : "");
      ExpectSameOnBothDevices<Dtype>("gather_matrix " + form, {Random<Dtype>(rows * k, 5), Random<Dtype>(rows, 6)},
                                     rows * cols,
                                     [&](auto m, auto in, Dtype* out) {
                                       m.gather_matrix(rows, k, transposed, in[0], bias ? in[1] : nullptr, out);
                                     },
                                     exact);
      // Scatter into an output laid out as [W b]: the weights, then the bias.
      ExpectSameOnBothDevices<Dtype>("scatter_matrix " + form, {Random<Dtype>(rows * cols, 7)}, rows * k + rows,
                                     [&](auto m, auto in, Dtype* out) {
                                       Dtype* b = bias ? out + rows * k : nullptr;
                                       m.scatter_matrix(rows, k, transposed, in[0], out, b);
                                     },
                                     exact);
    }
  }
  ExpectSameOnBothDevices<Dtype>("transpose", {Random<Dtype>(5 * 8, 8)}, 5 * 8,
                                 [&](auto m, auto in, Dtype* out) { m.transpose(5, 8, Dtype(0.5), in[0], out); },
                                 exact);
  std::vector<Dtype> dg = Random<Dtype>(6, 9), da = Random<Dtype>(4, 10);
  for (Dtype& v : dg) v = std::fabs(v);
  for (Dtype& v : da) v = std::fabs(v);
  ExpectSameOnBothDevices<Dtype>("divide_by_eigenvalues", {dg, da}, 6 * 4,
                                 [&](auto m, auto in, Dtype* out) {
                                   m.divide_by_eigenvalues(6, 4, in[0], in[1], Dtype(0.01), out);
                                 },
                                 rounding);
  ExpectSameOnBothDevices<Dtype>("gemv of a row sum", {Random<Dtype>(9 * 13, 11), std::vector<Dtype>(13, 1)}, 9,
                                 [&](auto m, auto in, Dtype* out) {
                                   m.gemv(CblasNoTrans, 9, 13, Dtype(1), in[0], in[1], Dtype(1), out);
                                 },
                                 rounding);
  // all_finite and block_dots return to the host.
  for (const Dtype bad : {std::numeric_limits<Dtype>::quiet_NaN(), std::numeric_limits<Dtype>::infinity()}) {
    for (int at : {-1, 0, 4999}) {
      std::vector<Dtype> v = Random<Dtype>(5000, 12);
      if (at >= 0) v[at] = bad;
      Blob<Dtype> b({5000});
      std::copy(v.begin(), v.end(), b.mutable_cpu_data());
      EXPECT_EQ(GpuKfacMath<Dtype>::all_finite(5000, b.gpu_data()), Cpu::all_finite(5000, v.data())) << "at " << at;
      EXPECT_EQ(Cpu::all_finite(5000, v.data()), at < 0);
    }
  }
  // Ranges of 1 to 3000 elements (one shorter than a thread block, one of none) summed in double on both.
  std::vector<Dtype> x = Random<Dtype>(5000, 13), y = Random<Dtype>(5000, 14);
  Blob<Dtype> bx({5000}), by({5000});
  std::copy(x.begin(), x.end(), bx.mutable_cpu_data());
  std::copy(y.begin(), y.end(), by.mutable_cpu_data());
  const std::vector<int> starts = {0, 3000, 3001, 3001, 3200}, sizes = {3000, 1, 0, 199, 1800};
  std::vector<double> want(5), got(5);
  Cpu::block_dots(5, starts.data(), sizes.data(), x.data(), y.data(), want.data());
  GpuKfacMath<Dtype>::block_dots(5, starts.data(), sizes.data(), bx.gpu_data(), by.gpu_data(), got.data());
  for (int b = 0; b < 5; ++b) EXPECT_NEAR(got[b], want[b], 1e-12 * (1 + std::fabs(want[b]))) << "range " << b;
  EXPECT_EQ(want[2], 0.0);
}

// The inversions (double): a symmetric positive definite S = B B^T + I, by cuSOLVER against LAPACK.
void CheckInversions() {
  const int n = 37;
  const std::vector<double> b = Random<double>(n * n, 15);
  std::vector<double> spd(n * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < n; ++k) spd[i * n + j] += b[i * n + k] * b[j * n + k];
    }
    spd[i * n + i] += 1;
  }
  ExpectSameOnBothDevices<double>("add_diagonal", {}, n * n, [&](auto m, auto, double* out) {
    m.add_diagonal(n, 0.5, out);
  }, 0);
  ExpectSameOnBothDevices<double>("divide_columns", {Random<double>(n, 16)}, n * n, [&](auto m, auto in, double* out) {
    m.divide_columns(n, in[0], out);
  }, 1e-15);
  ExpectSameOnBothDevices<double>("cholesky_inverse", {spd}, n * n, [&](auto m, auto in, double* out) {
    m.copy(n * n, in[0], out);
    EXPECT_TRUE(m.cholesky_inverse(n, out));
  }, 1e-12);
  // Eigenvectors are defined up to sign: compare the eigenvalues, and V diag(values) V^T with S.
  Blob<double> v({n * n}), values({n});
  std::copy(spd.begin(), spd.end(), v.mutable_cpu_data());
  ASSERT_TRUE(GpuKfacMath<double>::symmetric_eigen(n, v.mutable_gpu_data(), values.mutable_gpu_data()));
  std::vector<double> want_v(spd), want_values(n);
  ASSERT_TRUE(CpuKfacMath<double>::symmetric_eigen(n, want_v.data(), want_values.data()));
  EXPECT_LE(RelativeError(values.cpu_data(), want_values.data(), n), 1e-12) << "eigenvalues";
  std::vector<double> rebuilt(n * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double* e = v.cpu_data();
      for (int k = 0; k < n; ++k) rebuilt[i * n + j] += e[i * n + k] * values.cpu_data()[k] * e[j * n + k];
    }
  }
  EXPECT_LE(RelativeError(rebuilt.data(), spd.data(), n * n), 1e-12) << "V diag(values) V^T";
  // Not positive definite: both refuse.
  std::vector<double> indefinite(spd);
  indefinite[0] = -1e3;
  Blob<double> bad({n * n});
  std::copy(indefinite.begin(), indefinite.end(), bad.mutable_cpu_data());
  EXPECT_FALSE(GpuKfacMath<double>::cholesky_inverse(n, bad.mutable_gpu_data()));
  EXPECT_FALSE(CpuKfacMath<double>::cholesky_inverse(n, indefinite.data()));
  // Rounded to float on the device as on the host.
  Blob<float> rounded({n * n});
  Blob<double> exact({n * n});
  std::copy(b.begin(), b.end(), exact.mutable_cpu_data());
  GpuKfacMath<float>::convert(n * n, exact.gpu_data(), rounded.mutable_gpu_data());
  for (int i = 0; i < n * n; ++i) ASSERT_EQ(rounded.cpu_data()[i], static_cast<float>(b[i])) << i;
}
#endif

TEST_F(GpuTestKfac, DeviceOperationsMatchTheCpu) {
#ifdef STRATA_USE_CUDA
  CheckOperations<float>();
  CheckOperations<double>();
  CheckInversions();
#endif
}

// A grouped, padded, strided convolution, one without bias, pooling, and two inner products (ip1 wide enough,
// against a batch of 4, for the factored form).
const char* kNet = R"(
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 4 dim: 4 dim: 9 dim: 9 } shape { dim: 4 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 stride: 2 group: 2
                            weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "conv2" type: "Convolution" bottom: "c1" top: "c2"
        convolution_param { num_output: 5 kernel_size: 2 weight_filler { type: "gaussian" std: 0.3 }
                            bias_term: false } }
layer { name: "pool" type: "Pooling" bottom: "c2" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "p" top: "h"
        inner_product_param { num_output: 40 weight_filler { type: "gaussian" std: 0.3 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "act" type: "TanH" bottom: "h" top: "t" }
layer { name: "ip2" type: "InnerProduct" bottom: "t" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "l" }
)";

struct Trained {
  std::vector<std::vector<double>> weights, a, g;
  std::vector<double> losses;
};

// `solver_extra`: more SolverParameter text, merged in.
template <typename Dtype>
Trained Train(bool gpu, const std::string& kfac_text, const std::string& solver_extra = "") {
  Strata::set_mode(gpu ? Strata::GPU : Strata::CPU);
  SolverParameter p;
  ReadProtoFromTextString(kNet, p.mutable_net_param());
  p.set_type("KFAC");
  p.set_base_lr(0.05f);
  p.set_momentum(0.9f);
  p.set_weight_decay(0.001f);
  p.set_lr_policy("fixed");
  p.set_max_iter(100);
  p.set_random_seed(7);
  p.set_snapshot_after_train(false);
  p.set_display(0);
  ReadProtoFromTextString(kfac_text, p.mutable_kfac_param());
  SolverParameter extra;
  ReadProtoFromTextString(solver_extra, &extra);
  p.MergeFrom(extra);
  auto solver = SolverRegistry<Dtype>::Create(p);
  std::mt19937 gen(11);
  std::normal_distribution<double> normal(0, 1);
  Blob<Dtype>& x = *solver->net()->blob_by_name("x");
  Blob<Dtype>& label = *solver->net()->blob_by_name("label");
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = static_cast<Dtype>(normal(gen));
  for (int i = 0; i < label.count(); ++i) label.mutable_cpu_data()[i] = static_cast<Dtype>(i % 3);
  Trained t;
  const uint64_t copies_before = SyncedMemory::copies_to_host(MemoryCategory::kParameter);
  for (int i = 0; i < 5; ++i) {
    solver->Step(1);
    t.losses.push_back(*solver->net()->blob_by_name("l")->cpu_data());
  }
  if (gpu) {
    // A host read of a weight or a gradient copies it from the device, which the next device write would hide from
    // the heads: count the copies.
    EXPECT_EQ(SyncedMemory::copies_to_host(MemoryCategory::kParameter), copies_before)
        << "K-FAC copied weights or gradients to the host";
  }
  for (Blob<Dtype>* w : solver->net()->learnable_params()) {
    if (gpu) {
      EXPECT_EQ(w->data()->head(), SyncedMemory::HEAD_AT_GPU) << "K-FAC wrote weights on the host";
      EXPECT_EQ(w->diff()->resident_bytes(), 0u) << "a gradient's host copy, which only a copy from the device makes";
    }
    t.weights.emplace_back(w->cpu_data(), w->cpu_data() + w->count());
  }
  auto* kfac = dynamic_cast<KfacPreconditioner<Dtype>*>(solver->optimizer()->stage());
  for (const auto& block : kfac->blocks()) {
    t.a.push_back(block->A());
    t.g.push_back(block->G());
  }
  Strata::set_mode(Strata::CPU);
  return t;
}

// The GPU's run against the CPU's, both with `solver_extra` (SolverParameter text), the GPU's with `gpu_extra` too.
template <typename Dtype>
void ExpectGpuTrainsAsTheCpu(const std::string& kfac_text, double bound, const std::string& solver_extra = "",
                             const std::string& gpu_extra = "") {
  SCOPED_TRACE(kfac_text + " " + solver_extra + " " + gpu_extra);
  const Trained cpu = Train<Dtype>(false, kfac_text, solver_extra);
  const Trained gpu = Train<Dtype>(true, kfac_text, solver_extra + " " + gpu_extra);
  ASSERT_EQ(cpu.weights.size(), gpu.weights.size());
  ASSERT_EQ(cpu.a.size(), 5u);  // conv1's two groups, conv2, ip1, ip2
  const auto compare = [&](const char* what, const std::vector<std::vector<double>>& want,
                           const std::vector<std::vector<double>>& got) {
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(want[k].size(), got[k].size()) << what << " " << k;
      const double err = RelativeError(got[k].data(), want[k].data(), static_cast<int>(want[k].size()));
      EXPECT_LE(err, bound) << what << " " << k;
      std::printf("[gpu-kfac] %s %s #%zu normalised error %.3g\n", kfac_text.c_str(), what, k, err);
    }
  };
  compare("A", cpu.a, gpu.a);
  compare("G", cpu.g, gpu.g);
  compare("weights", cpu.weights, gpu.weights);
  compare("losses", {cpu.losses}, {gpu.losses});
}

const char* const kForms[] = {
    "damping: 0.01 split_damping: true inverse_method: EIGEN",
    "damping: 0.01 split_damping: true inverse_method: CHOLESKY kl_clip: 0.001",
    "damping: 0.01 split_damping: false inverse_method: EIGEN",
    // Identity sides beyond max_factor_dim: the A sides of all (19 to 41 wide) and ip1's G (40).
    "damping: 0.01 max_factor_dim: 18 split_damping: false",
    "damping: 0.01 max_factor_dim: 18 split_damping: true",
    "damping: 0.01 factor_decay: 0.5 inverse_interval: 2 factor_interval: 2",
    "damping: 0.01 fisher: TRUE_FISHER",
};

TEST_F(GpuTestKfac, StepsEqualTheCpusInDouble) {
  for (const char* form : kForms) ExpectGpuTrainsAsTheCpu<double>(form, 1e-9);
}

TEST_F(GpuTestKfac, StepsEqualTheCpusInFloat) {
  for (const char* form : kForms) ExpectGpuTrainsAsTheCpu<float>(form, 1e-4);
}

// A dynamic loss scale (a power of two, doubled every 2 iterations) divides out of the factors on the device as it
// does on the CPU: the GPU's scaled steps equal the CPU's unscaled ones to the same bound.
TEST_F(GpuTestKfac, StepsUnderALossScaleEqualTheCpusWithout) {
  for (const char* form : {kForms[0], kForms[6]}) {
    ExpectGpuTrainsAsTheCpu<float>(form, 1e-4, "", "loss_scale { scale: 4096 dynamic: true growth_interval: 2 }");
  }
}

// iter_size 2: the true Fisher's backward of the second pass keeps the first pass's gradients on the device (Train
// counts the copies to the host).
TEST_F(GpuTestKfac, StepsOverPassesEqualTheCpus) {
  for (const char* form : {kForms[0], kForms[6]}) ExpectGpuTrainsAsTheCpu<float>(form, 1e-4, "iter_size: 2");
}

}  // namespace
}  // namespace strata
