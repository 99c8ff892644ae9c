// Helpers shared by the ArgMax, Tile, Reduction, Filter and MVN layers (private to src/strata/layers).
#pragma once

#include "strata/blob.hpp"
#include "strata/parallel.hpp"

namespace strata {

// The index in [0, num_axes) that `axis` names in `blob` (negative counts from the end), or an Error that names
// the parameter it came from. The range is Caffe's CanonicalAxisIndex: [-num_axes, num_axes).
template <typename Dtype>
int CheckedAxis(const Blob<Dtype>& blob, int axis, const char* param) {
  const int n = blob.num_axes();
  STRATA_REQUIRE(axis >= -n && axis < n) << param << " " << axis << " is out of range for a bottom of shape "
                                         << blob.shape_string() << ": give an axis in [" << -n << ", " << n - 1
                                         << "]";
  return axis < 0 ? axis + n : axis;
}

// Runs f(r) for every row r in [0, rows), on several threads when `work` (the elements touched) pays for it.
template <typename F>
void ForEachRow(int rows, long long work, const F& f) {
#pragma omp parallel for schedule(static) if (parallel_worthwhile(work))
  for (int r = 0; r < rows; ++r) f(r);
}

}  // namespace strata
