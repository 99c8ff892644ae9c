#include "strata/common.hpp"

#include <cstdio>

namespace strata {

Strata::Mode Strata::mode_ = Strata::CPU;
int Strata::solver_rank_ = 0;
int Strata::solver_count_ = 1;

namespace {
// Every thread starts from a fixed seed so that runs are repeatable even without random_seed.
std::mt19937& thread_engine() {
  thread_local std::mt19937 engine(1701u);
  return engine;
}
}  // namespace

void Strata::set_random_seed(uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  thread_engine().seed(seq);
}

std::mt19937& Strata::rng() { return thread_engine(); }

uint64_t Strata::draw_seed() {
  auto& e = thread_engine();
  return (static_cast<uint64_t>(e()) << 32) | e();
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace strata
