// BatchReindex: rows picked (and repeated) by index, gradients summed back into the rows they came from, and
// indices that are not rows refused.
#include <gtest/gtest.h>

#include "gradient_checker.hpp"
#include "strata/layers/batch_reindex_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Param() {
  LayerParameter p;
  ReadProtoFromTextString("name: 'reindex' type: 'BatchReindex'", &p);
  return p;
}

TEST(BatchReindexLayer, HandWorked) {
  // Rows [10 11], [20 21], [30 31]; picks 2, 0, 2, 2 (row 1 left out).
  Blob<double> x({3, 2}), idx({4}), y;
  const double xv[] = {10, 11, 20, 21, 30, 31}, iv[] = {2, 0, 2, 2};
  std::copy(xv, xv + 6, x.mutable_cpu_data());
  std::copy(iv, iv + 4, idx.mutable_cpu_data());
  BatchReindexLayer<double> layer(Param());
  layer.SetUp({&x, &idx}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{4, 2}));
  layer.Forward({&x, &idx}, {&y});
  const double want[] = {30, 31, 10, 11, 30, 31, 30, 31};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y.cpu_data()[i], want[i]) << i;
  for (int i = 0; i < 8; ++i) y.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&y}, {true, false}, {&x, &idx});
  // Row 0 gets top row 1 (3, 4); row 1 nothing; row 2 top rows 0, 2, 3: (1+5+7, 2+6+8).
  const double dx[] = {3, 4, 0, 0, 13, 16};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(x.cpu_diff()[i], dx[i]) << i;
}

TEST(BatchReindexLayer, Gradient) {
  Blob<double> x({4, 3, 2}), idx({6}), y;
  FillUniform(&x, -1.0, 1.0);
  const double iv[] = {3, 1, 1, 0, 3, 3};
  std::copy(iv, iv + 6, idx.mutable_cpu_data());
  BatchReindexLayer<double> layer(Param());
  GradientChecker<double> checker(1e-4, 1e-7);
  checker.CheckGradient(&layer, {&x, &idx}, {&y}, 0);
  EXPECT_GT(checker.last_num_checked(), 0);
}

TEST(BatchReindexLayer, BadIndicesAndShapesAreErrors) {
  Blob<float> x({3, 2}), idx({2}), y;
  BatchReindexLayer<float> layer(Param());
  layer.SetUp({&x, &idx}, {&y});
  for (float bad : {3.f, -1.f, 0.5f}) {
    idx.mutable_cpu_data()[0] = 0;
    idx.mutable_cpu_data()[1] = bad;
    try {
      layer.Forward({&x, &idx}, {&y});
      ADD_FAILURE() << "index " << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("index 1 is"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'reindex'"), std::string::npos) << e.what();
    }
  }
  Blob<float> idx2({2, 1});
  BatchReindexLayer<float> two_d(Param());
  EXPECT_THROW(two_d.SetUp({&x, &idx2}, {&y}), Error);
  idx.mutable_cpu_data()[1] = 1;
  layer.Forward({&x, &idx}, {&y});
  EXPECT_THROW(layer.Backward({&y}, {true, true}, {&x, &idx}), Error);
}

}  // namespace
}  // namespace strata
