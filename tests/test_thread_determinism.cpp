// What docs/architecture.md promises about the compute threads (strata/parallel.hpp), checked bit for bit:
//   * a GEMM split across threads (by whole rows or columns of C, never along K) gives the same bits on every run
//     for a given thread count, and agrees with other thread counts to rounding (not to the bit: Debian's OpenBLAS
//     0.3.21 rounds a block of rows computed on its own differently in the last bits from the same rows inside the
//     whole product, on its Cooperlake and Haswell kernels alike, depending on the block's shape);
//   * a convolution gives each thread its own range of images and adds the threads' weight gradients in thread
//     order, so a given thread count gives the same bits on every run.
// Each case runs with 1, 2 and 3 threads (3 does not divide the extents evenly, and oversubscribes 2 cores).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "strata/layers/convolution_layer.hpp"
#include "strata/math_functions.hpp"
#include "strata/parallel.hpp"

namespace strata {
namespace {

constexpr int kThreadCounts[] = {1, 2, 3};

// Restores the thread count a test found, whatever it sets.
class ThreadCountTest : public ::testing::Test {
 protected:
  void TearDown() override { set_compute_threads(saved_); }

 private:
  int saved_ = compute_threads();
};

template <typename Dtype>
bool SameBits(const std::vector<Dtype>& a, const std::vector<Dtype>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Dtype)) == 0;
}

template <typename Dtype>
std::vector<Dtype> Values(int n, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Dtype> v(n);
  for (auto& x : v) x = static_cast<Dtype>(u(engine));
  return v;
}

// C = op(A) op(B) + 0.5 C on `threads` threads, for shapes that are taller than wide (row blocks) and wider than
// tall (column blocks), with extents the 16-aligned blocks do not divide and enough work that the split is taken.
struct GemmCase {
  int M, N, K;
  bool ta, tb;
};
std::vector<GemmCase> GemmCases() {
  std::vector<GemmCase> cases;
  for (auto [M, N, K] : {std::array<int, 3>{100, 84, 300}, std::array<int, 3>{52, 150, 420}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) cases.push_back({M, N, K, ta, tb});
    }
  }
  return cases;
}
template <typename Dtype>
std::vector<Dtype> Gemm(const GemmCase& c, int threads) {
  set_compute_threads(threads);
  const auto A = Values<Dtype>(c.M * c.K, 1), B = Values<Dtype>(c.K * c.N, 2);
  std::vector<Dtype> C = Values<Dtype>(c.M * c.N, 3);
  cpu_gemm<Dtype>(c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans, c.M, c.N, c.K, Dtype(1),
                  A.data(), B.data(), Dtype(0.5), C.data());
  return C;
}
std::string Describe(const GemmCase& c, int threads) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + " ta " +
         std::to_string(c.ta) + " tb " + std::to_string(c.tb) + ", " + std::to_string(threads) + " threads";
}

template <typename Dtype>
void ExpectGemmRepeatableAndCloseAcrossThreadCounts() {
  for (const GemmCase& c : GemmCases()) {
    const std::vector<Dtype> one = Gemm<Dtype>(c, 1);
    for (int threads : kThreadCounts) {
      const std::vector<Dtype> first = Gemm<Dtype>(c, threads);
      EXPECT_TRUE(SameBits(Gemm<Dtype>(c, threads), first)) << Describe(c, threads) << ": a second run differs";
      for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_NEAR(first[i], one[i], (sizeof(Dtype) == 4 ? 1e-5 : 1e-13) * (1 + std::fabs(one[i])))
            << Describe(c, threads) << ", element " << i;
      }
    }
  }
}

TEST_F(ThreadCountTest, GemmRepeatsItsBitsForEachThreadCountAndAgreesAcrossThem) {
  ExpectGemmRepeatableAndCloseAcrossThreadCounts<float>();
  ExpectGemmRepeatableAndCloseAcrossThreadCounts<double>();
}

// One forward and backward of a convolution large enough to be shared among the threads.
struct ConvRun {
  std::vector<float> top, bottom_diff, weight_diff, bias_diff;
};

ConvRun RunConvolution() {
  LayerParameter p;
  p.set_type("Convolution");
  auto* c = p.mutable_convolution_param();
  c->set_num_output(16);
  c->add_kernel_size(3);
  c->add_pad(1);
  c->mutable_weight_filler()->set_type("gaussian");
  c->mutable_bias_filler()->set_type("uniform");
  c->mutable_bias_filler()->set_min(-1);
  Strata::set_random_seed(1701);  // the same weights every run
  Blob<float> x({7, 3, 16, 16}), y;
  FillUniform(&x, -1.f, 1.f, 11);
  ConvolutionLayer<float> layer(p);
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  Blob<float> dy(y.shape());
  FillUniform(&dy, -1.f, 1.f, 12);
  std::copy(dy.cpu_data(), dy.cpu_data() + dy.count(), y.mutable_cpu_diff());
  // Parameter gradients accumulate onto what is there: start from values that are not zero.
  Blob<float> start(layer.blobs()[0]->shape());
  FillUniform(&start, -1.f, 1.f, 13);
  std::copy(start.cpu_data(), start.cpu_data() + start.count(), layer.blobs()[0]->mutable_cpu_diff());
  cpu_set(layer.blobs()[1]->count(), 0.25f, layer.blobs()[1]->mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  auto values = [](const float* p, int n) { return std::vector<float>(p, p + n); };
  return {values(y.cpu_data(), y.count()), values(x.cpu_diff(), x.count()),
          values(layer.blobs()[0]->cpu_diff(), layer.blobs()[0]->count()),
          values(layer.blobs()[1]->cpu_diff(), layer.blobs()[1]->count())};
}

TEST_F(ThreadCountTest, ConvolutionGivesTheSameBitsEveryRunForAGivenThreadCount) {
  ConvRun one_thread;
  for (int threads : kThreadCounts) {
    set_compute_threads(threads);
    const ConvRun first = RunConvolution();
    for (int run = 0; run < 3; ++run) {
      const ConvRun again = RunConvolution();
      EXPECT_TRUE(SameBits(again.top, first.top)) << threads << " threads, run " << run;
      EXPECT_TRUE(SameBits(again.bottom_diff, first.bottom_diff)) << threads << " threads, run " << run;
      EXPECT_TRUE(SameBits(again.weight_diff, first.weight_diff)) << threads << " threads, run " << run;
      EXPECT_TRUE(SameBits(again.bias_diff, first.bias_diff)) << threads << " threads, run " << run;
    }
    if (threads == 1) {
      one_thread = first;
      continue;
    }
    // Across thread counts only the order of the weight-gradient sums changes: the values stay close.
    for (size_t i = 0; i < first.weight_diff.size(); ++i) {
      ASSERT_NEAR(first.weight_diff[i], one_thread.weight_diff[i], 1e-4 * (1 + std::fabs(one_thread.weight_diff[i])))
          << threads << " threads, weight gradient " << i;
    }
    for (size_t i = 0; i < first.top.size(); ++i) {
      ASSERT_NEAR(first.top[i], one_thread.top[i], 1e-5 * (1 + std::fabs(one_thread.top[i]))) << threads << " threads";
    }
  }
  // The runs did real work: the gradients moved away from where they started.
  EXPECT_NE(one_thread.bias_diff[0], 0.25f);
  EXPECT_GT(cpu_asum<float>(static_cast<int>(one_thread.bottom_diff.size()), one_thread.bottom_diff.data()), 1.f);
}

}  // namespace
}  // namespace strata
