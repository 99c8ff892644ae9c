#include "strata/memory_tracker.hpp"

namespace strata {

std::atomic<size_t> MemoryTracker::current_[MemoryTracker::kNumCategories];
std::atomic<size_t> MemoryTracker::peak_[MemoryTracker::kNumCategories];

void MemoryTracker::allocated(MemoryCategory c, size_t bytes) {
  const size_t now = current_[idx(c)].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t seen = peak_[idx(c)].load(std::memory_order_relaxed);
  while (now > seen && !peak_[idx(c)].compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::released(MemoryCategory c, size_t bytes) {
  current_[idx(c)].fetch_sub(bytes, std::memory_order_relaxed);
}

void MemoryTracker::reset_peak(MemoryCategory c) {
  peak_[idx(c)].store(current_[idx(c)].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void MemoryTracker::reset_all_peaks() {
  for (int i = 0; i < kNumCategories; ++i) reset_peak(static_cast<MemoryCategory>(i));
}

}  // namespace strata
