#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "strata/im2col.hpp"

namespace strata {
namespace {

// Every geometry in a small grid of sizes, kernels, strides, pads and dilations (square and not).
std::vector<ConvGeometry> Geometries() {
  std::vector<ConvGeometry> all;
  for (int h : {1, 4, 7})
    for (int w : {3, 8})
      for (int k : {1, 2, 3})
        for (int s : {1, 2, 3})
          for (int p : {0, 1, 2})
            for (int d : {1, 2}) {
              ConvGeometry g;
              g.channels = 2;
              g.height = h;
              g.width = w;
              g.kernel_h = k;
              g.kernel_w = 4 - k;
              g.stride_h = s;
              g.stride_w = 4 - s;
              g.pad_h = p;
              g.pad_w = 2 - p;
              g.dilation_h = d;
              g.dilation_w = 3 - d;
              if (g.out_h() > 0 && g.out_w() > 0 &&
                  h + 2 * g.pad_h >= g.dilation_h * (g.kernel_h - 1) + 1 &&
                  w + 2 * g.pad_w >= g.dilation_w * (g.kernel_w - 1) + 1) {
                all.push_back(g);
              }
            }
  return all;
}

TEST(Im2col, MatchesDefinitionAndCol2imIsItsAdjoint) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  int checked = 0;
  for (const ConvGeometry& g : Geometries()) {
    const int num = 3, P = g.out_count(), rows = g.col_rows();
    const int image = g.channels * g.height * g.width;
    std::vector<double> x(num * image), col(rows * num * P), c(rows * num * P), back(num * image);
    for (double& v : x) v = u(rng);
    for (double& v : c) v = u(rng);
    im2col_batch_cpu(x.data(), g, num, col.data());
    // The definition, entry by entry (0 in the padding).
    for (int n = 0; n < num; ++n)
      for (int ch = 0; ch < g.channels; ++ch)
        for (int i = 0; i < g.kernel_h; ++i)
          for (int j = 0; j < g.kernel_w; ++j)
            for (int oh = 0; oh < g.out_h(); ++oh)
              for (int ow = 0; ow < g.out_w(); ++ow) {
                const int ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
                const int iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
                const bool inside = ih >= 0 && ih < g.height && iw >= 0 && iw < g.width;
                const double want = inside ? x[n * image + (ch * g.height + ih) * g.width + iw] : 0.0;
                const int row = (ch * g.kernel_h + i) * g.kernel_w + j;
                ASSERT_EQ(col[row * num * P + n * P + oh * g.out_w() + ow], want)
                    << g.height << "x" << g.width << " k" << g.kernel_h << "x" << g.kernel_w << " s" << g.stride_h
                    << " p" << g.pad_h << " d" << g.dilation_h;
              }
    // <col2im(c), x> = <c, im2col(x)>.
    col2im_batch_cpu(c.data(), g, num, back.data());
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < x.size(); ++i) lhs += back[i] * x[i];
    for (size_t i = 0; i < c.size(); ++i) rhs += c[i] * col[i];
    ASSERT_NEAR(lhs, rhs, 1e-10);
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(Im2col, SingleImageWithRowStride) {
  // One image unfolded into a wider matrix leaves the other columns alone.
  ConvGeometry g;
  g.channels = 1;
  g.height = 3;
  g.width = 3;
  g.kernel_h = g.kernel_w = 2;  // 2x2 outputs, 4 rows
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> col(4 * 6, -1.f);
  im2col_cpu(x, g, col.data() + 1, 6);
  const float want[4][4] = {{1, 2, 4, 5}, {2, 3, 5, 6}, {4, 5, 7, 8}, {5, 6, 8, 9}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(col[r * 6], -1.f);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(col[r * 6 + 1 + p], want[r][p]);
    EXPECT_EQ(col[r * 6 + 5], -1.f);
  }
  float back[9];
  col2im_cpu(col.data() + 1, g, back, 6);
  const float counts[] = {1, 2, 1, 2, 4, 2, 1, 2, 1};  // how many windows hold each pixel
  for (int i = 0; i < 9; ++i) EXPECT_EQ(back[i], x[i] * counts[i]);
}

TEST(Im2col, BatchMatchesOneImageAtATime) {
  // Large enough for the OpenMP path (taken when OpenMP may run beside BLAS, e.g. OMP_WAIT_POLICY=passive).
  ConvGeometry g;
  g.channels = 16;
  g.height = 20;
  g.width = 19;
  g.kernel_h = g.kernel_w = 3;
  g.pad_h = g.pad_w = 1;
  g.stride_w = 2;
  const int num = 4, P = g.out_count(), image = g.channels * g.height * g.width;
  std::vector<float> x(num * image), batch(g.col_rows() * num * P), single(batch.size());
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  im2col_batch_cpu(x.data(), g, num, batch.data());
  for (int n = 0; n < num; ++n) im2col_cpu(x.data() + n * image, g, single.data() + n * P, num * P);
  EXPECT_EQ(batch, single);
  std::vector<float> back_batch(x.size()), back_single(x.size());
  col2im_batch_cpu(batch.data(), g, num, back_batch.data());
  for (int n = 0; n < num; ++n) col2im_cpu(batch.data() + n * P, g, back_single.data() + n * image, num * P);
  EXPECT_EQ(back_batch, back_single);
}

}  // namespace
}  // namespace strata
