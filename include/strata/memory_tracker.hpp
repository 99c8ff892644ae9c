// The one place where Strata counts memory: every SyncedMemory allocation and release reports here with its
// category, so `strata time`, `strata plan` and the recompute executor see real activation bytes.
#pragma once

#include <atomic>
#include <cstddef>

namespace strata {

enum class MemoryCategory { kActivation = 0, kParameter = 1, kWorkspace = 2, kOther = 3 };

class MemoryTracker {
 public:
  static constexpr int kNumCategories = 4;

  static void allocated(MemoryCategory c, size_t bytes);
  static void released(MemoryCategory c, size_t bytes);

  static size_t current(MemoryCategory c) { return current_[idx(c)].load(std::memory_order_relaxed); }
  static size_t peak(MemoryCategory c) { return peak_[idx(c)].load(std::memory_order_relaxed); }
  // Restarts peak tracking from the current level (e.g. after setup, before the timed iterations).
  static void reset_peak(MemoryCategory c);
  static void reset_all_peaks();

 private:
  static int idx(MemoryCategory c) { return static_cast<int>(c); }
  static std::atomic<size_t> current_[kNumCategories];
  static std::atomic<size_t> peak_[kNumCategories];
};

}  // namespace strata
