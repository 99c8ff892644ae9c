// Counter-based random numbers shared by the CPU code and the CUDA kernels of the stochastic layers (Dropout,
// STOCHASTIC pooling): the k-th value for a seed is a pure function of (seed, k), so any thread can draw any value,
// in any order, and the GPU draws exactly the CPU's values for the same seed (Strata::draw_seed()).
// Private to src/strata/layers.
#pragma once

#include <cstdint>

#include "strata/common.hpp"

namespace strata {
namespace counter_rng {

// SplitMix64's output function: a bijective mix of all 64 bits; applied to seed + k * golden gamma it is the
// k-th output of the SplitMix64 generator (which passes BigCrush), computable for any k independently.
STRATA_HOST_DEVICE inline uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The k-th 64-bit value of the stream `seed`.
STRATA_HOST_DEVICE inline uint64_t draw(uint64_t seed, uint64_t k) {
  return splitmix64(seed + (k + 1) * 0x9E3779B97F4A7C15ull);
}

// The k-th value of the stream as a double uniform in [0, 1) (its top 53 bits).
STRATA_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t k) {
  return static_cast<double>(draw(seed, k) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace counter_rng
}  // namespace strata
