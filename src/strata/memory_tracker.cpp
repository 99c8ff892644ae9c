#include "strata/memory_tracker.hpp"

#include "strata/common.hpp"

namespace strata {

std::atomic<size_t> MemoryTracker::current_[MemoryTracker::kNumSpaces * MemoryTracker::kNumCategories];
std::atomic<size_t> MemoryTracker::peak_[MemoryTracker::kNumSpaces * MemoryTracker::kNumCategories];
std::atomic<size_t> MemoryTracker::host_limit_{0};

void MemoryTracker::allocated(MemoryCategory c, size_t bytes, MemorySpace s) {
  const int i = idx(c, s);
  const size_t now = current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t seen = peak_[i].load(std::memory_order_relaxed);
  while (now > seen && !peak_[i].compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::released(MemoryCategory c, size_t bytes, MemorySpace s) {
  current_[idx(c, s)].fetch_sub(bytes, std::memory_order_relaxed);
}

void MemoryTracker::reset_peak(MemoryCategory c, MemorySpace s) {
  peak_[idx(c, s)].store(current_[idx(c, s)].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void MemoryTracker::reset_all_peaks() {
  for (int s = 0; s < kNumSpaces; ++s) {
    for (int c = 0; c < kNumCategories; ++c) reset_peak(static_cast<MemoryCategory>(c), static_cast<MemorySpace>(s));
  }
}

void MemoryTracker::check_host_limit(size_t bytes) {
  const size_t limit = host_limit_.load(std::memory_order_relaxed);
  if (limit == 0) return;
  size_t held = 0;
  for (int c = 0; c < kNumCategories; ++c) held += current(static_cast<MemoryCategory>(c));
  STRATA_REQUIRE(bytes <= limit && held <= limit - bytes)
      << "allocating " << human_bytes(static_cast<double>(bytes)) << " would pass the host memory limit of "
      << human_bytes(static_cast<double>(limit)) << " (" << human_bytes(static_cast<double>(held)) << " held)";
}

}  // namespace strata
