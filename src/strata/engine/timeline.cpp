#include "strata/engine/timeline.hpp"

#include <cstdio>
#include <sstream>

#include "strata/comm/communicator.hpp"
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

std::string Timeline::EventsJson(int pid) const {
  std::ostringstream out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Span& e : spans_) {
    char times[64];
    std::snprintf(times, sizeof(times), "%.1f,\"dur\":%.1f", e.ts_us, e.dur_us);
    out << "{\"name\":\"" << e.name << "\",\"cat\":\"" << e.category << "\",\"ph\":\"X\",\"pid\":" << pid
        << ",\"tid\":" << e.row << ",\"ts\":" << times << "},\n";
  }
  return out.str();
}

void Timeline::Write(const std::string& file, MPI_Comm comm) const {
  int rank = 0, ranks = 1;
  if (comm != MPI_COMM_NULL) {
    STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    STRATA_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  }
  const std::string mine = EventsJson(rank);
  std::string all = mine;
  if (ranks > 1) {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(ranks), displs(ranks);
    STRATA_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm));
    if (rank == 0) {
      int total = 0;
      for (int r = 0; r < ranks; ++r) {
        displs[r] = total;
        total += lens[r];
      }
      all.assign(total, '\0');
    }
    STRATA_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                                 comm));
  }
  if (rank != 0) return;
  while (!all.empty() && (all.back() == '\n' || all.back() == ',')) all.pop_back();
  WriteFileAtomically(file, "{\"traceEvents\":[\n" + all + "\n],\"displayTimeUnit\":\"ms\"}\n");
}

}  // namespace strata
