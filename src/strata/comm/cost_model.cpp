#include "strata/comm/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "strata/common.hpp"
#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/allreduce_shape.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/hybrid_allreduce.hpp"

namespace strata {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

double NetworkCostModel::predict(const std::string& algorithm, int ranks, double m) const {
  return ShapeAllreduce(algorithm, ranks, m).seconds(alpha, beta, gamma);
}

std::vector<CrossoverRow> NetworkCostModel::rows(int ranks, const std::vector<std::string>& candidates) const {
  STRATA_REQUIRE(!candidates.empty()) << "the network cost model needs at least one candidate algorithm";
  // At each power of two the predicted-fastest candidate; a row grows while its candidate keeps winning.
  std::vector<CrossoverRow> out;
  for (size_t bytes = 4; bytes <= (size_t(1) << 30); bytes *= 2) {
    const std::string* best = &candidates[0];
    for (const auto& c : candidates)
      if (predict(c, ranks, double(bytes)) < predict(*best, ranks, double(bytes))) best = &c;
    if (!out.empty() && out.back().algorithm == *best) out.back().max_bytes = bytes;
    else out.push_back({bytes, *best});
  }
  out.back().max_bytes = CrossoverRow::kUnlimited;
  return out;
}

std::string NetworkCostModel::describe() const {
  char text[160];
  snprintf(text, sizeof text, "alpha %.1f us, beta %.3f GB/s, gamma %.2f GB/s", alpha * 1e6,
           beta > 0 ? 1e-9 / beta : 0.0, gamma > 0 ? 1e-9 / gamma : 0.0);
  return text;
}

NetworkCostModel NetworkCostModel::fit(const std::string& algorithm, int ranks,
                                       const std::vector<std::pair<double, double>>& samples, double gamma,
                                       double min_alpha) {
  // Each sample: t = P alpha + L beta + S gamma. Weighted by 1 / t, the normal equations of (alpha, beta).
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  double smallest = 0, largest = 0;
  for (const auto& [bytes, t] : samples) {
    STRATA_REQUIRE(bytes > 0 && t > 0) << "a fit needs positive sizes and times";
    const AllreduceShape shape = ShapeAllreduce(algorithm, ranks, bytes);
    const double w = 1 / (t * t), p = shape.num_phases(), l = shape.rank_link_bytes();
    const double y = t - shape.rank_sum_bytes() * gamma;
    a11 += w * p * p;
    a12 += w * p * l;
    a22 += w * l * l;
    b1 += w * p * y;
    b2 += w * l * y;
    smallest = smallest == 0 ? bytes : std::min(smallest, bytes);
    largest = std::max(largest, bytes);
  }
  STRATA_REQUIRE(samples.size() >= 2 && largest > smallest)
      << "fitting the network cost model needs times at 2 or more message sizes";
  NetworkCostModel m;
  m.gamma = gamma;
  const double det = a11 * a22 - a12 * a12;
  m.alpha = (b1 * a22 - b2 * a12) / det;
  m.beta = (a11 * b2 - a12 * b1) / det;
  // Neither figure may be below its floor (alpha: min_alpha, beta: 0): fit the other alone then.
  if (m.alpha < min_alpha) {
    m.alpha = min_alpha;
    m.beta = (b2 - a12 * min_alpha) / a22;
  } else if (m.beta < 0) {
    m.beta = 0;
    m.alpha = b1 / a11;
  }
  m.beta = std::max(m.beta, 0.0);
  return m;
}

NetworkCostModel NetworkCostModel::measure(MPI_Comm comm) {
  int rank = 0, size = 1;
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  STRATA_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int peer = rank == 0 ? size - 1 : 0;
  const bool pair = size > 1 && (rank == 0 || rank == size - 1);
  constexpr size_t kLarge = 4 << 20;
  std::vector<char> buf(kLarge);
  // Half a round trip of `bytes`, median of `reps` after one untimed.
  auto ping = [&](size_t bytes, int reps) {
    std::vector<double> t;
    for (int i = 0; i <= reps; ++i) {
      STRATA_MPI_CHECK(MPI_Barrier(comm));
      if (!pair) continue;
      const double t0 = MPI_Wtime();
      const int n = static_cast<int>(bytes);
      if (rank == 0) {
        STRATA_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, peer, 0, comm));
        STRATA_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE));
      } else {
        STRATA_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, peer, 0, comm, MPI_STATUS_IGNORE));
        STRATA_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, peer, 0, comm));
      }
      if (i > 0) t.push_back((MPI_Wtime() - t0) / 2);
    }
    return t.empty() ? 0.0 : median(t);
  };
  NetworkCostModel m;
  if (size > 1) {
    m.alpha = ping(8, 50);
    m.beta = std::max(0.0, ping(kLarge, 8) - m.alpha) / kLarge;
  }
  std::vector<float> a(kLarge / sizeof(float), 1.0f), b(kLarge / sizeof(float), 2.0f);
  std::vector<double> t;
  for (int i = 0; i <= 8; ++i) {
    const double t0 = MPI_Wtime();
    comm_detail::sum_into(a.data(), b.data(), a.size(), DataType::kFloat);
    if (i > 0) t.push_back(MPI_Wtime() - t0);
  }
  m.gamma = median(t) / kLarge;
  double figures[3] = {m.alpha, m.beta, m.gamma};
  STRATA_MPI_CHECK(MPI_Bcast(figures, 3, MPI_DOUBLE, 0, comm));
  return NetworkCostModel{figures[0], figures[1], figures[2]};
}

}  // namespace strata
