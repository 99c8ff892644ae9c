// CpuKfacMath's inversions (kfac_math.hpp): LAPACK in double.
#include "kfac_math.hpp"

#include <lapacke.h>

namespace strata {

bool lapack_cholesky_inverse(int n, double* m) {
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', n, m, n) != 0) return false;
  if (LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', n, m, n) != 0) return false;
  for (int i = 0; i < n; ++i) {  // potri fills the upper triangle only
    for (int j = 0; j < i; ++j) m[static_cast<long>(i) * n + j] = m[static_cast<long>(j) * n + i];
  }
  return CpuKfacMath<double>::all_finite(n * n, m);
}

bool lapack_symmetric_eigen(int n, double* m, double* values) {
  if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, m, n, values) != 0) return false;
  return CpuKfacMath<double>::all_finite(n * n, m) && CpuKfacMath<double>::all_finite(n, values);
}

}  // namespace strata
