#include "strata/engine/timeline.hpp"

#include <cstdio>
#include <sstream>

#include "strata/comm/collectives.hpp"
#include "strata/util/io.hpp"

namespace strata {

Timeline::Timeline(bool enabled) : enabled_(enabled), epoch_(std::chrono::steady_clock::now()) {}

double Timeline::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch_).count();
}

void Timeline::Record(const std::string& name, const char* category, int row, double t0_us) {
  if (!enabled_) return;
  const double t1 = now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back({name, category, row, t0_us, t1 - t0_us});
}

void Timeline::Add(const std::string& name, const char* category, int row, double ts_us, double dur_us) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back({name, category, row, ts_us, dur_us});
}

void Timeline::NameRow(int row, const std::string& name) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  row_names_.emplace_back(row, name);
}

std::string Timeline::EventsJson(int pid) const {
  std::ostringstream out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& r : row_names_) {
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << r.first
        << ",\"args\":{\"name\":\"" << r.second << "\"}},\n";
  }
  for (const Span& e : spans_) {
    char times[64];
    std::snprintf(times, sizeof(times), "%.1f,\"dur\":%.1f", e.ts_us, e.dur_us);
    out << "{\"name\":\"" << e.name << "\",\"cat\":\"" << e.category << "\",\"ph\":\"X\",\"pid\":" << pid
        << ",\"tid\":" << e.row << ",\"ts\":" << times << "},\n";
  }
  return out.str();
}

void Timeline::Write(const std::string& file, Collectives* ranks) const {
  const int rank = ranks ? ranks->rank() : 0;
  const std::vector<std::string> spans =
      ranks ? ranks->GatherToRoot(EventsJson(rank)) : std::vector<std::string>{EventsJson(rank)};
  if (rank != 0) return;
  std::string all;
  for (const std::string& s : spans) all += s;
  while (!all.empty() && (all.back() == '\n' || all.back() == ',')) all.pop_back();
  WriteFileAtomically(file, "{\"traceEvents\":[\n" + all + "\n],\"displayTimeUnit\":\"ms\"}\n");
}

}  // namespace strata
