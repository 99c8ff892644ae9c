// The one place where Strata counts memory: every SyncedMemory allocation and release reports here with its
// category and where it lives (host or GPU), so `strata time`, `strata plan` and the recompute executor see real
// activation bytes.
#pragma once

#include <atomic>
#include <cstddef>

namespace strata {

enum class MemoryCategory { kActivation = 0, kParameter = 1, kWorkspace = 2, kOther = 3 };
// Host memory (pageable or pinned), or GPU memory. A block with both copies counts in both.
enum class MemorySpace { kHost = 0, kDevice = 1 };

class MemoryTracker {
 public:
  static constexpr int kNumCategories = 4;
  static constexpr int kNumSpaces = 2;

  static void allocated(MemoryCategory c, size_t bytes, MemorySpace s = MemorySpace::kHost);
  static void released(MemoryCategory c, size_t bytes, MemorySpace s = MemorySpace::kHost);

  static size_t current(MemoryCategory c, MemorySpace s = MemorySpace::kHost) {
    return current_[idx(c, s)].load(std::memory_order_relaxed);
  }
  static size_t peak(MemoryCategory c, MemorySpace s = MemorySpace::kHost) {
    return peak_[idx(c, s)].load(std::memory_order_relaxed);
  }
  // Restarts peak tracking from the current level (e.g. after setup, before the timed iterations).
  static void reset_peak(MemoryCategory c, MemorySpace s = MemorySpace::kHost);
  static void reset_all_peaks();

  // A cap on host memory held by SyncedMemory blocks (all categories together); 0, the default, is none. An
  // allocation that would pass it throws an Error instead, so a net definition asking for more than the cap is
  // refused cleanly (the fuzz targets run every input under a small cap; fuzz/README.md).
  static void set_host_limit(size_t bytes) { host_limit_.store(bytes, std::memory_order_relaxed); }
  // Throws the Error when `bytes` more on the host would pass the cap.
  static void check_host_limit(size_t bytes);

 private:
  static int idx(MemoryCategory c, MemorySpace s) {
    return static_cast<int>(s) * kNumCategories + static_cast<int>(c);
  }
  static std::atomic<size_t> current_[kNumSpaces * kNumCategories];
  static std::atomic<size_t> peak_[kNumSpaces * kNumCategories];
  static std::atomic<size_t> host_limit_;
};

}  // namespace strata
