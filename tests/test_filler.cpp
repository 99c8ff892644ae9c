// Fillers: each one's defining property on blobs large enough for the statistics to be sharp (bounds, means,
// standard deviations against the fan-in/fan-out formulas, row sums, the bilinear kernel's values), plus
// repeatability under a seed and the errors for bad parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "strata/filler.hpp"

namespace strata {
namespace {

template <typename Dtype>
class FillerTest : public ::testing::Test {
 protected:
  // Fills blob_, reshaped to `shape`, with a `type` filler whose other fields `set` sets, from a fixed seed.
  void Fill(const std::string& type, const std::vector<int>& shape,
            const std::function<void(FillerParameter*)>& set = {}) {
    FillerParameter p;
    p.set_type(type);
    if (set) set(&p);
    blob_.Reshape(shape);
    Strata::set_random_seed(1234);
    GetFiller<Dtype>(p)->Fill(&blob_);
  }
  double Mean() const {
    double s = 0;
    for (int i = 0; i < blob_.count(); ++i) s += blob_.cpu_data()[i];
    return s / blob_.count();
  }
  double Std() const {
    const double m = Mean();
    double s = 0;
    for (int i = 0; i < blob_.count(); ++i) s += (blob_.cpu_data()[i] - m) * (blob_.cpu_data()[i] - m);
    return std::sqrt(s / blob_.count());
  }
  Dtype Min() const { return *std::min_element(blob_.cpu_data(), blob_.cpu_data() + blob_.count()); }
  Dtype Max() const { return *std::max_element(blob_.cpu_data(), blob_.cpu_data() + blob_.count()); }

  Blob<Dtype> blob_;
};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FillerTest, Dtypes);

TYPED_TEST(FillerTest, Constant) {
  this->Fill("constant", {3, 4, 5}, [](FillerParameter* p) { p->set_value(-2.5f); });
  for (int i = 0; i < this->blob_.count(); ++i) ASSERT_EQ(this->blob_.cpu_data()[i], TypeParam(-2.5));
  this->Fill("constant", {7});  // the default value is 0
  EXPECT_EQ(this->Max(), TypeParam(0));
  EXPECT_EQ(this->Min(), TypeParam(0));
}

TYPED_TEST(FillerTest, UniformStaysInItsRangeAndCoversIt) {
  this->Fill("uniform", {200, 500}, [](FillerParameter* p) {
    p->set_min(-3);
    p->set_max(1);
  });
  EXPECT_GE(this->Min(), TypeParam(-3));
  EXPECT_LE(this->Max(), TypeParam(1));
  EXPECT_LT(this->Min(), TypeParam(-2.99));
  EXPECT_GT(this->Max(), TypeParam(0.99));
  EXPECT_NEAR(this->Mean(), -1.0, 0.02);
  EXPECT_NEAR(this->Std(), 4 / std::sqrt(12.0), 0.02);
}

TYPED_TEST(FillerTest, GaussianHasItsMeanAndStd) {
  this->Fill("gaussian", {200, 500}, [](FillerParameter* p) {
    p->set_mean(2);
    p->set_std(0.5f);
  });
  EXPECT_NEAR(this->Mean(), 2.0, 0.01);
  EXPECT_NEAR(this->Std(), 0.5, 0.01);
}

TYPED_TEST(FillerTest, SparseGaussianKeepsAboutSparseInputsPerOutput) {
  // 50 outputs (axis 0), sparse 10: each weight survives with probability 10 / 50.
  this->Fill("gaussian", {50, 2000}, [](FillerParameter* p) {
    p->set_std(1);
    p->set_sparse(10);
  });
  int non_zero = 0;
  for (int i = 0; i < this->blob_.count(); ++i) non_zero += this->blob_.cpu_data()[i] != 0;
  EXPECT_NEAR(non_zero / double(this->blob_.count()), 0.2, 0.01);
}

TYPED_TEST(FillerTest, PositiveUnitballRowsArePositiveAndSumToOne) {
  this->Fill("positive_unitball", {6, 3, 5, 5});
  EXPECT_GE(this->Min(), TypeParam(0));
  const int dim = this->blob_.count(1);
  for (int n = 0; n < 6; ++n) {
    double sum = 0;
    for (int j = 0; j < dim; ++j) sum += this->blob_.cpu_data()[n * dim + j];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << n;
  }
}

TYPED_TEST(FillerTest, XavierScaleFollowsVarianceNorm) {
  // fan_in = 20 * 3 * 3 = 180, fan_out = 1000 * 3 * 3 = 9000; uniform in [-a, a] with a = sqrt(3 / n).
  const std::vector<int> shape = {1000, 20, 3, 3};
  struct Case { FillerParameter::VarianceNorm norm; double n; };
  for (Case c : {Case{FillerParameter::FAN_IN, 180}, Case{FillerParameter::FAN_OUT, 9000},
                 Case{FillerParameter::AVERAGE, (180 + 9000) / 2.0}}) {
    this->Fill("xavier", shape, [&](FillerParameter* p) { p->set_variance_norm(c.norm); });
    const double a = std::sqrt(3 / c.n);
    EXPECT_GE(this->Min(), TypeParam(-a) * TypeParam(1 + 1e-6)) << c.norm;
    EXPECT_LE(this->Max(), TypeParam(a) * TypeParam(1 + 1e-6)) << c.norm;
    EXPECT_GT(this->Max(), TypeParam(0.99 * a)) << c.norm;
    EXPECT_NEAR(this->Mean(), 0, 0.01 * a) << c.norm;
    EXPECT_NEAR(this->Std(), a / std::sqrt(3.0), 0.01 * a) << c.norm;  // variance 1 / n
  }
}

TYPED_TEST(FillerTest, MsraStdFollowsVarianceNorm) {
  // Gaussian with std sqrt(2 / n).
  const std::vector<int> shape = {500, 40, 3, 3};  // fan_in 360, fan_out 4500
  struct Case { FillerParameter::VarianceNorm norm; double n; };
  for (Case c : {Case{FillerParameter::FAN_IN, 360}, Case{FillerParameter::FAN_OUT, 4500},
                 Case{FillerParameter::AVERAGE, (360 + 4500) / 2.0}}) {
    this->Fill("msra", shape, [&](FillerParameter* p) { p->set_variance_norm(c.norm); });
    const double sigma = std::sqrt(2 / c.n);
    EXPECT_NEAR(this->Mean(), 0, 0.01 * sigma) << c.norm;
    EXPECT_NEAR(this->Std(), sigma, 0.01 * sigma) << c.norm;
  }
}

TYPED_TEST(FillerTest, BilinearIsTheUpsamplingKernel) {
  // k = 4 (factor 2): f = 2, c = 3/4; the 1-D weights are 1 - |x/2 - 3/4| = 0.25, 0.75, 0.75, 0.25.
  this->Fill("bilinear", {2, 3, 4, 4});
  const double w1[] = {0.25, 0.75, 0.75, 0.25};
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
          EXPECT_EQ(this->blob_.data_at(n, c, y, x), TypeParam(w1[y] * w1[x])) << n << c << y << x;
  // k = 3 (odd): f = 2, c = 1/2; weights 0.5, 1, 0.5, so the centre is 1.
  this->Fill("bilinear", {1, 1, 3, 3});
  EXPECT_EQ(this->blob_.data_at(0, 0, 1, 1), TypeParam(1));
  EXPECT_EQ(this->blob_.data_at(0, 0, 0, 1), TypeParam(0.5));
  EXPECT_EQ(this->blob_.data_at(0, 0, 0, 0), TypeParam(0.25));
}

TYPED_TEST(FillerTest, SameSeedSameValues) {
  for (const char* type : {"uniform", "gaussian", "xavier", "msra", "positive_unitball"}) {
    this->Fill(type, {30, 7});
    const std::vector<TypeParam> first(this->blob_.cpu_data(), this->blob_.cpu_data() + this->blob_.count());
    this->Fill(type, {30, 7});  // Fill seeds again
    for (int i = 0; i < this->blob_.count(); ++i) ASSERT_EQ(this->blob_.cpu_data()[i], first[i]) << type << " " << i;
    EXPECT_NE(first[0], first[1]) << type;
  }
}

TEST(Filler, BadParametersAreErrors) {
  FillerParameter p;
  p.set_type("orthogonal");
  EXPECT_THROW(GetFiller<float>(p), Error);
  Blob<float> b({4, 4});
  p.set_type("uniform");
  p.set_min(2);
  p.set_max(1);
  EXPECT_THROW(GetFiller<float>(p)->Fill(&b), Error);
  p.Clear();
  p.set_type("gaussian");
  p.set_std(0);
  EXPECT_THROW(GetFiller<float>(p)->Fill(&b), Error);
  p.Clear();
  p.set_type("bilinear");
  EXPECT_THROW(GetFiller<float>(p)->Fill(&b), Error);  // needs 4-D square kernels
  Blob<float> empty({0, 3});
  p.set_type("xavier");
  EXPECT_THROW(GetFiller<float>(p)->Fill(&empty), Error);
}

}  // namespace
}  // namespace strata
