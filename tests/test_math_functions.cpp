// math_functions: the BLAS wrappers against plain loops (every transpose combination of gemm and gemv, sizes
// on both sides of the threaded split), the element-wise kernels against their definitions, and the random
// number helpers' ranges and moments.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "finite_cases.hpp"
#include "strata/common.hpp"
#include "strata/math_functions.hpp"
#include "strata/parallel.hpp"

namespace strata {
namespace {

template <typename Dtype>
class MathFunctions : public ::testing::Test {
 protected:
  // Values in [-1, 1] from a fixed seed, different per call.
  std::vector<Dtype> Random(int n) {
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<Dtype> v(n);
    for (auto& x : v) x = static_cast<Dtype>(u(engine_));
    return v;
  }
  // Relative tolerance of a sum of k products of values in [-1, 1].
  static double Tolerance(int k) { return (sizeof(Dtype) == sizeof(float) ? 1e-5 : 1e-13) * k; }

 private:
  std::mt19937 engine_{12345};
};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MathFunctions, Dtypes);

// C = alpha op(A) op(B) + beta C in row-major storage, the definition.
template <typename Dtype>
std::vector<double> NaiveGemm(bool ta, bool tb, int M, int N, int K, double alpha, const std::vector<Dtype>& A,
                              const std::vector<Dtype>& B, double beta, const std::vector<Dtype>& C) {
  std::vector<double> out(static_cast<size_t>(M) * N);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        const double a = ta ? A[static_cast<size_t>(k) * M + i] : A[static_cast<size_t>(i) * K + k];
        const double b = tb ? B[static_cast<size_t>(j) * K + k] : B[static_cast<size_t>(k) * N + j];
        s += a * b;
      }
      out[static_cast<size_t>(i) * N + j] = alpha * s + beta * C[static_cast<size_t>(i) * N + j];
    }
  }
  return out;
}

TYPED_TEST(MathFunctions, GemmMatchesTheDefinitionForEveryTranspose) {
  using Dtype = TypeParam;
  const int saved = compute_threads();
  struct Size { int M, N, K; };
  // Small (one BLAS call), tall and wide (split into row or column blocks when there are several threads).
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    for (Size s : {Size{3, 5, 7}, Size{100, 80, 300}, Size{40, 170, 400}}) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const auto A = this->Random(s.M * s.K), B = this->Random(s.K * s.N);
          std::vector<Dtype> C = this->Random(s.M * s.N);
          const auto want = NaiveGemm(ta, tb, s.M, s.N, s.K, 0.75, A, B, -0.5, C);
          cpu_gemm<Dtype>(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                          Dtype(0.75), A.data(), B.data(), Dtype(-0.5), C.data());
          for (size_t i = 0; i < C.size(); ++i) {
            ASSERT_NEAR(C[i], want[i], this->Tolerance(s.K))
                << s.M << "x" << s.N << "x" << s.K << " ta " << ta << " tb " << tb << " threads " << threads
                << " element " << i;
          }
        }
      }
    }
  }
  set_compute_threads(saved);
}

TYPED_TEST(MathFunctions, GemvMatchesTheDefinition) {
  using Dtype = TypeParam;
  const int M = 13, N = 29;
  const auto A = this->Random(M * N);
  for (bool trans : {false, true}) {
    const int in = trans ? M : N, out = trans ? N : M;
    const auto x = this->Random(in);
    std::vector<Dtype> y = this->Random(out);
    std::vector<double> want(out);
    for (int i = 0; i < out; ++i) {
      double s = 0;
      for (int k = 0; k < in; ++k) s += double(trans ? A[k * N + i] : A[i * N + k]) * x[k];
      want[i] = 2.0 * s + 0.25 * y[i];
    }
    cpu_gemv<Dtype>(trans ? CblasTrans : CblasNoTrans, M, N, Dtype(2), A.data(), x.data(), Dtype(0.25), y.data());
    for (int i = 0; i < out; ++i) EXPECT_NEAR(y[i], want[i], this->Tolerance(in)) << "trans " << trans << " " << i;
  }
}

TYPED_TEST(MathFunctions, VectorBlas) {
  using Dtype = TypeParam;
  const int n = 37;
  const auto x = this->Random(n);
  const auto y0 = this->Random(n);
  std::vector<Dtype> y = y0;
  cpu_axpy<Dtype>(n, Dtype(-1.5), x.data(), y.data());
  for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], -1.5 * x[i] + y0[i], this->Tolerance(2)) << i;
  y = y0;
  cpu_axpby<Dtype>(n, Dtype(0.5), x.data(), Dtype(3), y.data());
  for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], 0.5 * x[i] + 3.0 * y0[i], this->Tolerance(4)) << i;
  y = y0;
  cpu_scal<Dtype>(n, Dtype(-4), y.data());
  for (int i = 0; i < n; ++i) EXPECT_EQ(y[i], Dtype(-4) * y0[i]) << i;  // a power of two: exact

  double dot = 0, asum = 0, strided = 0;
  for (int i = 0; i < n; ++i) {
    dot += double(x[i]) * y0[i];
    asum += std::fabs(double(x[i]));
  }
  for (int i = 0; i < n / 3; ++i) strided += double(x[3 * i]) * y0[2 * i];
  EXPECT_NEAR(cpu_dot<Dtype>(n, x.data(), y0.data()), dot, this->Tolerance(n));
  EXPECT_NEAR(cpu_asum<Dtype>(n, x.data()), asum, this->Tolerance(n));
  EXPECT_NEAR(cpu_strided_dot<Dtype>(n / 3, x.data(), 3, y0.data(), 2), strided, this->Tolerance(n));
  EXPECT_EQ(cpu_dot<Dtype>(0, x.data(), y0.data()), Dtype(0));
}

TYPED_TEST(MathFunctions, ElementWiseKernels) {
  using Dtype = TypeParam;
  const int n = 19;
  const auto a = this->Random(n), b = this->Random(n);
  std::vector<Dtype> pos(n), y(n);
  for (int i = 0; i < n; ++i) pos[i] = Dtype(0.1) + std::fabs(a[i]);
  auto check = [&](const char* what, auto f) {
    for (int i = 0; i < n; ++i) EXPECT_EQ(y[i], static_cast<Dtype>(f(i))) << what << " element " << i;
  };
  cpu_copy<Dtype>(n, a.data(), y.data());
  check("copy", [&](int i) { return a[i]; });
  cpu_set<Dtype>(n, Dtype(0), y.data());
  check("set 0", [&](int) { return 0; });
  cpu_set<Dtype>(n, Dtype(2.5), y.data());
  check("set", [&](int) { return 2.5; });
  cpu_add_scalar<Dtype>(n, Dtype(-1), y.data());
  check("add_scalar", [&](int) { return 1.5; });
  cpu_scale<Dtype>(n, Dtype(3), a.data(), y.data());
  check("scale", [&](int i) { return Dtype(3) * a[i]; });
  cpu_add<Dtype>(n, a.data(), b.data(), y.data());
  check("add", [&](int i) { return a[i] + b[i]; });
  cpu_sub<Dtype>(n, a.data(), b.data(), y.data());
  check("sub", [&](int i) { return a[i] - b[i]; });
  cpu_mul<Dtype>(n, a.data(), b.data(), y.data());
  check("mul", [&](int i) { return a[i] * b[i]; });
  cpu_div<Dtype>(n, a.data(), pos.data(), y.data());
  check("div", [&](int i) { return a[i] / pos[i]; });
  cpu_sqr<Dtype>(n, a.data(), y.data());
  check("sqr", [&](int i) { return a[i] * a[i]; });
  cpu_abs<Dtype>(n, a.data(), y.data());
  check("abs", [&](int i) { return std::fabs(a[i]); });
  cpu_sqrt<Dtype>(n, pos.data(), y.data());
  check("sqrt", [&](int i) { return std::sqrt(pos[i]); });
  cpu_exp<Dtype>(n, a.data(), y.data());
  check("exp", [&](int i) { return std::exp(a[i]); });
  cpu_log<Dtype>(n, pos.data(), y.data());
  check("log", [&](int i) { return std::log(pos[i]); });
  cpu_powx<Dtype>(n, pos.data(), Dtype(1.5), y.data());
  check("powx", [&](int i) { return std::pow(pos[i], Dtype(1.5)); });
  double sum = 0;
  for (Dtype v : a) sum += v;
  EXPECT_NEAR(cpu_sum<Dtype>(n, a.data()), sum, this->Tolerance(n));
  // Spot values, so the kernels are not only checked against the same library calls.
  const Dtype four[] = {4, 0.25, 1, 9};
  Dtype out[4];
  cpu_sqrt<Dtype>(4, four, out);
  EXPECT_EQ(out[0], Dtype(2));
  EXPECT_EQ(out[1], Dtype(0.5));
  EXPECT_EQ(out[3], Dtype(3));
  cpu_log<Dtype>(1, four + 2, out);
  EXPECT_EQ(out[0], Dtype(0));
}

TYPED_TEST(MathFunctions, CopyRowsCopiesStridedRuns) {
  using Dtype = TypeParam;
  const int saved = compute_threads();
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    // Small rows, and rows long enough to be cut into pieces across the threads.
    for (int width : {5, 40000}) {
      const int rows = 3, src_stride = width + 7, dst_stride = width + 2;
      std::vector<Dtype> src(static_cast<size_t>(rows) * src_stride), dst(static_cast<size_t>(rows) * dst_stride, -1);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<Dtype>(i);
      cpu_copy_rows<Dtype>(rows, width, src.data(), src_stride, dst.data(), dst_stride);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < dst_stride; ++c) {
          const Dtype want = c < width ? src[static_cast<size_t>(r) * src_stride + c] : Dtype(-1);
          ASSERT_EQ(dst[static_cast<size_t>(r) * dst_stride + c], want) << "row " << r << " column " << c;
        }
      }
    }
  }
  set_compute_threads(saved);
}

TYPED_TEST(MathFunctions, RandomNumbersHaveTheirRangeAndMoments) {
  using Dtype = TypeParam;
  const int n = 20000;
  std::vector<Dtype> v(n);
  Strata::set_random_seed(77);
  rng_uniform<Dtype>(n, Dtype(-2), Dtype(3), v.data());
  double mean = 0;
  for (Dtype x : v) {
    ASSERT_GE(x, Dtype(-2));
    ASSERT_LE(x, Dtype(3));
    mean += x;
  }
  EXPECT_NEAR(mean / n, 0.5, 0.05);
  rng_uniform<Dtype>(3, Dtype(4), Dtype(4), v.data());
  EXPECT_EQ(v[2], Dtype(4)) << "an empty range gives its one value";

  rng_gaussian<Dtype>(n, Dtype(1), Dtype(0.5), v.data());
  double m = 0, sq = 0;
  for (Dtype x : v) m += x;
  m /= n;
  for (Dtype x : v) sq += (x - m) * (x - m);
  EXPECT_NEAR(m, 1.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / n), 0.5, 0.02);

  std::vector<unsigned int> bits(n);
  rng_bernoulli<Dtype>(n, Dtype(0.3), bits.data());
  int ones = 0;
  for (unsigned int b : bits) {
    ASSERT_LE(b, 1u);
    ones += b;
  }
  EXPECT_NEAR(ones / double(n), 0.3, 0.02);

  // The same seed gives the same numbers.
  std::vector<Dtype> first(10), second(10);
  Strata::set_random_seed(5);
  rng_gaussian<Dtype>(10, Dtype(0), Dtype(1), first.data());
  Strata::set_random_seed(5);
  rng_gaussian<Dtype>(10, Dtype(0), Dtype(1), second.data());
  EXPECT_EQ(first, second);
}

TYPED_TEST(MathFunctions, AllFiniteFindsEveryInfAndNaN) {
  finite_cases::ExpectFindsEveryNonFinite<TypeParam>([](const finite_cases::Spans<TypeParam>& spans) {
    bool finite = true;
    for (const auto& s : spans) finite = cpu_all_finite(s.size(), s.data()) && finite;
    return finite;
  });
}

}  // namespace
}  // namespace strata
