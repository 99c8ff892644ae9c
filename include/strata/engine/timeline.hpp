// Timeline: spans of work (a layer's forward or backward, a chunk's allreduce, an update, a wait) on rows (the
// compute thread, each communication thread), written as Chrome-trace JSON (chrome://tracing, Perfetto). The
// data-parallel engine records one per rank (`strata train --timeline`); `strata time --timeline` records the
// layers of one process.
#pragma once

#include <chrono>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

namespace strata {

class Collectives;

class Timeline {
 public:
  // A disabled timeline records nothing (Record returns at once), so callers need not test.
  explicit Timeline(bool enabled = true);

  bool enabled() const { return enabled_; }
  // Microseconds since the timeline was made: the clock of every span.
  double now_us() const;
  // A span from t0_us to now on row `row` (0: the compute thread). Safe to call from any thread.
  void Record(const std::string& name, const char* category, int row, double t0_us);
  // A span with given times (a simulated one: strata/scale/iteration_model.hpp). `category` must outlive the
  // timeline (a string literal).
  void Add(const std::string& name, const char* category, int row, double ts_us, double dur_us);
  // Names row `row` in the trace viewer ("computation", "thread 1").
  void NameRow(int row, const std::string& name);
  // Writes the spans as Chrome-trace JSON to `file`, atomically. With collectives, collective: rank 0 gathers
  // every rank's spans (pid = rank) and writes them; otherwise this process's alone.
  void Write(const std::string& file, Collectives* ranks = nullptr) const;

 private:
  struct Span {
    std::string name;
    const char* category;
    int row;
    double ts_us, dur_us;
  };
  std::string EventsJson(int pid) const;

  bool enabled_;
  std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
  std::vector<std::pair<int, std::string>> row_names_;
};

}  // namespace strata
