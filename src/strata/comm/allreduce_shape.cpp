#include "strata/comm/allreduce_shape.hpp"

#include <algorithm>

#include "strata/common.hpp"

namespace strata {

namespace {
int floor_log2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}
int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}
}  // namespace

const std::vector<std::string>& shaped_allreduce_algorithms() {
  static const std::vector<std::string> names = {"brb", "brd", "vhd", "vhd_seg", "ring", "ring_seg", "linear"};
  return names;
}

double AllreduceShape::rank_link_bytes() const {
  double s = 0;
  for (const auto& p : phases) s += p.link_bytes;
  return s;
}

double AllreduceShape::rank_sum_bytes() const {
  double s = 0;
  for (const auto& p : phases) s += p.sum_bytes;
  return s;
}

double AllreduceShape::seconds(double alpha, double beta, double gamma) const {
  double t = 0;
  for (const auto& p : phases) t += alpha + p.link_bytes * beta + p.sum_bytes * gamma;
  return t;
}

AllreduceShape ShapeAllreduce(const std::string& algorithm, int n, double m) {
  const auto& known = shaped_allreduce_algorithms();
  STRATA_REQUIRE(std::find(known.begin(), known.end(), algorithm) != known.end())
      << "the scaling model has no shape for allreduce algorithm '" << algorithm
      << "' (it covers brb, brd, vhd, vhd_seg, ring, ring_seg and linear)";
  STRATA_REQUIRE(n >= 1) << "an allreduce needs at least one rank, got " << n;
  AllreduceShape s;
  s.algorithm = algorithm;
  s.ranks = n;
  s.bytes = m;
  if (n == 1) return s;
  auto phase = [&s](double link, double sum) { s.phases.push_back({link, sum}); };

  if (algorithm == "brb") {
    // A binomial tree into rank 0 (it receives and sums in every round), then the same tree backwards.
    const int depth = ceil_log2(n);
    for (int j = 0; j < depth; ++j) phase(m, m);
    for (int j = 0; j < depth; ++j) phase(m, 0);
    s.total_sent_bytes = 2 * m * (n - 1);
    s.total_sum_bytes = m * (n - 1);
    return s;
  }
  if (algorithm == "ring" || algorithm == "ring_seg") {
    const double block = m / n;
    for (int j = 0; j < n - 1; ++j) phase(block, block);
    for (int j = 0; j < n - 1; ++j) phase(block, 0);
    s.total_sent_bytes = 2 * m * (n - 1);
    s.total_sum_bytes = m * (n - 1);
    return s;
  }
  if (algorithm == "linear") {
    phase(m * (n - 1), m * (n - 1));
    phase(m * (n - 1), 0);
    s.total_sent_bytes = 2 * m * (n - 1);
    s.total_sum_bytes = m * (n - 1);
    return s;
  }

  // brd and vhd run on p ranks after folding r = n - p of them in.
  const int k = floor_log2(n), p = 1 << k, r = n - p;
  if (r > 0) phase(m, m);
  if (algorithm == "brd") {
    for (int j = 0; j < k; ++j) phase(m, m);
    s.total_sent_bytes = m * p * k;
    s.total_sum_bytes = m * p * k;
  } else {  // vhd, vhd_seg: halve the range each phase, then double it back
    double part = m;
    for (int j = 0; j < k; ++j) {
      part /= 2;
      phase(part, part);
    }
    for (int j = 0; j < k; ++j) {
      phase(part, 0);
      part *= 2;
    }
    s.total_sent_bytes = 2 * m * (p - 1);
    s.total_sum_bytes = m * (p - 1);
  }
  if (r > 0) {
    phase(m, 0);
    s.total_sent_bytes += 2 * r * m;
    s.total_sum_bytes += r * m;
  }
  return s;
}

}  // namespace strata
