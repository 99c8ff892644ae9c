// Per-row sums on the GPU, shared by Reduction and MVN (private to src/strata/layers).
//
// A blob seen as `rows` contiguous rows of `dim` values. Short rows (a reduction over a last axis of a few
// values, MVN over small spatial maps) get one thread each; long rows go to channel_reduce, which splits each
// row over several blocks and adds the partial sums in a fixed order. Either way the sums are in double and
// deterministic, as on the CPU.
#pragma once

#include "channel_reduce.cuh"
#include "strata/cuda.hpp"

namespace strata {
namespace row_reduce_detail {

constexpr int kShortRow = 64;  // rows up to this long are summed by one thread each

template <typename F, typename G>
__global__ void short_rows(int rows, int dim, F f, G finish) {
  STRATA_KERNEL_LOOP(r, rows) {
    double a = 0, b = 0;
    const long long base = r * dim;
    for (int i = 0; i < dim; ++i) {
      const double2 v = f(base + i, static_cast<int>(r));
      a += v.x;
      b += v.y;
    }
    finish(static_cast<int>(r), a, b);
  }
}

}  // namespace row_reduce_detail

// For every row r: (sum0, sum1) = the sum over its elements k (indices into the whole blob) of f(k, r), a
// double2; then finish(r, sum0, sum1) once. f and finish are __device__ lambdas (defined in free functions:
// nvcc allows device lambdas only in functions with public access).
template <typename F, typename G>
void row_reduce(int rows, int dim, F f, G finish) {
  if (rows == 0) return;
  if (dim <= row_reduce_detail::kShortRow) {
    row_reduce_detail::short_rows<<<cuda::blocks(rows), cuda::kThreads>>>(rows, dim, f, finish);
    STRATA_CUDA_KERNEL_CHECK();
    return;
  }
  // Seen as channel_reduce's (outer, dim, inner) = (1, rows, dim): channel r is the run [r * dim, (r + 1) * dim).
  channel_reduce(1, rows, dim, f, finish);
}

}  // namespace strata
