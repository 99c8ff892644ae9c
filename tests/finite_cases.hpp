// The cases of cpu_all_finite and gpu_all_finite (math_functions.hpp), for either to run: spans of every size (empty,
// one value, several blocks of the device's), values whose sum of magnitudes overflows although each is finite, an inf,
// a -inf or a NaN first, inside or last, and more spans than one device launch takes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace strata {
namespace finite_cases {

template <typename Dtype>
using Spans = std::vector<std::vector<Dtype>>;

template <typename Dtype>
void ExpectFindsEveryNonFinite(const std::function<bool(const Spans<Dtype>&)>& all_finite) {
  Spans<Dtype> spans = {{}, {Dtype(1.5)}, std::vector<Dtype>(1000, Dtype(-0.25)), std::vector<Dtype>(70000, Dtype(2))};
  // Finite values whose sum of magnitudes is not: a check through asum would call them infinite.
  spans[2][17] = std::numeric_limits<Dtype>::max();
  spans[2][18] = -std::numeric_limits<Dtype>::max();
  EXPECT_TRUE(all_finite(spans));
  const Dtype inf = std::numeric_limits<Dtype>::infinity(), nan = std::numeric_limits<Dtype>::quiet_NaN();
  struct Case {
    size_t span, index;
    Dtype value;
  };
  const Case cases[] = {{1, 0, inf}, {2, 500, -inf}, {3, 69999, inf}, {3, 0, nan}, {3, 40000, nan}};
  for (const Case& c : cases) {
    Spans<Dtype> bad = spans;
    bad[c.span][c.index] = c.value;
    EXPECT_FALSE(all_finite(bad)) << c.value << " at " << c.index << " of span " << c.span;
  }
  // More spans than one launch of the device's kernel holds (64): the last one's inf is found too.
  Spans<Dtype> many(130, std::vector<Dtype>(10, Dtype(1)));
  EXPECT_TRUE(all_finite(many));
  many[129][9] = inf;
  EXPECT_FALSE(all_finite(many));
}

}  // namespace finite_cases
}  // namespace strata
