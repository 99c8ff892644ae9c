// Small helpers for hand-worked layer tests: write a blob's values from a list, compare values with a list.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "strata/blob.hpp"

namespace strata {

inline void SetValues(Blob<double>* blob, const std::vector<double>& values) {
  ASSERT_EQ(blob->count(), static_cast<int>(values.size()));
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data());
}

// Equal to within 4 ulps, or within `tol` when given.
inline void ExpectValues(const double* got, const std::vector<double>& expected, double tol = -1) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (tol < 0) {
      EXPECT_DOUBLE_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
    }
  }
}

}  // namespace strata
