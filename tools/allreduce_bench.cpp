// allreduce_bench: times Strata's allreduce algorithms against MPI_Allreduce, checks every result, and
// (--tune) measures this machine's crossovers into a table file the hybrid reads.
//
//   mpirun -np 4 --oversubscribe --bind-to none --mca btl self,vader bin/allreduce_bench
//       --min_bytes=4 --max_bytes=256M --algorithms=hybrid,brd,vhd_seg,ring_seg,mpi
//   mpirun -np 4 ... bin/allreduce_bench --tune --tune_out=allreduce.table
//   bash scripts/cluster.sh mpirun -np 2 --map-by node bin/allreduce_bench --model   (alpha, beta, gamma)
//
// For each size all algorithms run interleaved, rep by rep and in a rotating order, in one process, so
// drifting latency levels hit them alike. A rep's time is the slowest rank's; the table shows the median and 90th percentile
// over reps, algorithm bandwidth (size / time) and bus bandwidth (2 (N-1)/N x size / time, the traffic
// a bandwidth-optimal allreduce puts on each rank's link), and the winner of each size is marked *.
// The "memcpy" row times every rank copying the same number of bytes at once: the machine's memory-copy
// bandwidth under the same load, which the bus bandwidth is given as a fraction of (% memcpy).
// Bad input (unknown algorithm, malformed table, a table without rows for this rank count) ends every
// rank with one message and exit status 1. See docs/allreduce.md.
#include <gflags/gflags.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <unistd.h>

#include "strata/common.hpp"
#include "strata/comm/allreduce.hpp"
#include "strata/comm/allreduce_shape.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/cost_model.hpp"
#include "strata/scale/machine.hpp"
#include "strata/comm/hybrid_allreduce.hpp"
#include "strata/comm/topology.hpp"
#include "strata/util/flag_parsing.hpp"
#include "strata/util/io.hpp"
#include "allreduce_flags.hpp"  // --allreduce_table: the table the hybrid runs

DEFINE_string(algorithms, "hybrid,linear,brb,brd,vhd,vhd_seg,ring,ring_seg,shm,mpi",
              "Comma-separated algorithms to time: hybrid, linear, brb, brd, vhd, vhd_seg, ring, ring_seg, shm, mpi "
              "(MPI_Allreduce), and Open MPI's own forced algorithms mpi_linear, mpi_nonoverlapping, "
              "mpi_recursive_doubling, mpi_ring, mpi_segmented_ring, mpi_rabenseifner (or mpi_all for "
              "all six)");
DEFINE_string(sizes, "", "Comma-separated message sizes in bytes (suffixes K, M, G = KiB, MiB, GiB); "
                         "overrides --min_bytes/--max_bytes/--factor");
DEFINE_string(min_bytes, "4", "Smallest message size (bytes; K, M, G suffixes allowed)");
DEFINE_string(max_bytes, "256M", "Largest message size (bytes; K, M, G suffixes allowed)");
DEFINE_int32(factor, 4, "Each size is this many times the previous one");
DEFINE_int32(reps, 20, "Timed repetitions per size and algorithm (fewer for large sizes, see --seconds)");
DEFINE_int32(min_reps, 5, "Fewest timed repetitions, whatever --seconds says");
DEFINE_double(seconds, 4.0, "Time budget per size for all algorithms together; large sizes get fewer reps");
DEFINE_int32(burst, 1, "Calls timed back to back per rep, each on its own copy of the input, the rep's time "
                      "their mean (at most 64 MiB of copies: fewer calls at large sizes). 1 times a single call "
                      "after a barrier, which includes how unevenly the ranks leave the barrier; more measure "
                      "the latency of calls that follow each other, as a layer's gradients do in training");
DEFINE_bool(skew, false, "Also print how unevenly the ranks leave MPI_Barrier (the spread of their exit times, "
                         "by CLOCK_MONOTONIC), which a single timed call includes: meaningful only where all "
                         "ranks read one clock, as on one machine or the test bed of scripts/cluster.sh");
DEFINE_int32(warmup, 2, "Untimed repetitions per size and algorithm before timing");
DEFINE_string(dtype, "float", "Element type: float or double");
DEFINE_bool(check, true, "Check every result against the expected sum");
DEFINE_bool(csv, false, "Print CSV instead of the table");
DEFINE_bool(memcpy, true, "Also time a memcpy of each size on every rank at once (the bandwidth reference)");
DEFINE_bool(tune, false, "Measure the crossovers of Strata's algorithms (linear, brb, brd, vhd, vhd_seg, ring, "
                         "ring_seg, shm, hier) on powers of two from --min_bytes to --max_bytes and write them "
                         "to --tune_out as the rows for this rank count (for this layout, NODESxRANKS, when the "
                         "ranks span several nodes)");
DEFINE_bool(model, false, "Measure the network cost model between rank 0 and the last rank (alpha: latency, beta: "
                          "seconds per byte, gamma: seconds per byte summed; docs/allreduce.md) and print the "
                          "crossovers it predicts for 2 to 256 nodes, instead of timing the algorithms");
DEFINE_string(model_out, "", "With --model: also write the figures fitted to vhd's times (at --sizes, default 256K,"
                             "1M,4M,16M) as a machine file for `strata scale --network` (docs/scale.md), with this "
                             "machine's shared-memory copy rate and core count");
DEFINE_string(tune_out, "allreduce.table", "Table file --tune writes; rows it has for other rank counts are kept");
DEFINE_double(tune_tolerance, 0.03, "In --tune, an algorithm within this fraction of the fastest keeps its "
                                    "range going rather than flip the table on noise");

namespace strata {
namespace {

int g_rank = 0, g_size = 1;

std::string size_text(size_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

// The input pattern: small integers, so sums are exact, and the expected sum of element i depends only
// on i % kPeriod, which makes checking a 256 MiB result cheap.
constexpr size_t kPeriod = 11;
double input_value(size_t i, int rank) { return double(long(i % kPeriod) + (rank % 5) - 7); }

struct Timing {
  std::string name;
  std::vector<double> seconds;  // per rep, slowest rank
  double median = 0, p90 = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

struct SizeResult {
  size_t bytes;
  std::vector<Timing> timings;  // algorithms, then memcpy last when timed
  std::string hybrid_choice;    // what the hybrid ran at this size, and why (when it was timed)
};

class Bench {
 public:
  Bench(std::vector<std::string> names, DataType type, size_t max_bytes, MPI_Comm comm)
      : names_(std::move(names)), type_(type), comm_(comm) {
    // The hybrid follows --allreduce_table when given, else the built-in table.
    for (const auto& n : names_) {
      AllreducePolicy policy = n == "hybrid" && !FLAGS_allreduce_table.empty()
                                   ? AllreducePolicy::from_table_file(FLAGS_allreduce_table)
                                   : AllreducePolicy::from_name(n);
      algorithms_.push_back(policy.create(comm));
    }
    const size_t es = size_of(type);
    max_count_ = std::max<size_t>(1, max_bytes / es);
    buf_.resize(max_count_ * es);
    input_.resize(max_count_ * es);
    for (size_t i = 0; i < max_count_; ++i) {
      double v = input_value(i, g_rank);
      if (type == DataType::kFloat) reinterpret_cast<float*>(input_.data())[i] = float(v);
      else reinterpret_cast<double*>(input_.data())[i] = v;
    }
    for (size_t k = 0; k < kPeriod; ++k) {
      expected_[k] = 0;
      for (int r = 0; r < g_size; ++r) expected_[k] += input_value(k, r);
    }
    memcpy(buf_.data(), input_.data(), buf_.size());  // touch every page now
  }

  SizeResult measure(size_t bytes) {
    const size_t es = size_of(type_);
    const size_t count = std::max<size_t>(1, bytes / es);
    SizeResult res{count * es, {}, {}};
    const size_t nalg = algorithms_.size();
    res.timings.resize(nalg + (FLAGS_memcpy ? 1 : 0));
    for (size_t a = 0; a < nalg; ++a) {
      res.timings[a].name = names_[a];
      if (names_[a] == "hybrid") res.hybrid_choice = algorithms_[a]->explain(count * es);
    }
    if (FLAGS_memcpy) res.timings[nalg].name = "memcpy";

    // Warm-up, which also sizes the number of timed reps to the time budget (rank 0 decides for all).
    double warm = 0;
    for (size_t a = 0; a < nalg; ++a)
      for (int w = 0; w < std::max(1, FLAGS_warmup); ++w) warm += run_once(a, count) / std::max(1, FLAGS_warmup);
    int reps = FLAGS_reps;
    const double rep_seconds = warm * burst_calls(count * es);  // warm is per call
    if (rep_seconds > 0) reps = static_cast<int>(std::min<double>(FLAGS_reps, FLAGS_seconds / rep_seconds));
    reps = std::max(reps, FLAGS_min_reps);
    STRATA_MPI_CHECK(MPI_Bcast(&reps, 1, MPI_INT, 0, comm_));

    std::vector<std::vector<double>> local(res.timings.size(), std::vector<double>(reps));
    for (int r = 0; r < reps; ++r) {
      // Rotate the order rep by rep, so no algorithm always runs first (or right after the same one).
      for (size_t i = 0; i < nalg; ++i) {
        size_t a = (i + r) % nalg;
        local[a][r] = run_once(a, count);
      }
      if (FLAGS_memcpy) {
        STRATA_MPI_CHECK(MPI_Barrier(comm_));
        double t0 = MPI_Wtime();
        memcpy(buf_.data(), input_.data(), count * es);
        local[nalg][r] = MPI_Wtime() - t0;
      }
    }
    for (size_t a = 0; a < res.timings.size(); ++a) {
      auto& t = res.timings[a];
      t.seconds.resize(reps);
      STRATA_MPI_CHECK(MPI_Reduce(local[a].data(), t.seconds.data(), reps, MPI_DOUBLE, MPI_MAX, 0, comm_));
      t.median = percentile(t.seconds, 0.5);
      t.p90 = percentile(t.seconds, 0.9);
    }
    return res;
  }

 private:
  // One allreduce of `count` elements with algorithm a on freshly copied input, or a burst of them back to
  // back (--burst); returns this rank's seconds per call. A wrong result ends the job (it is a bug, and the
  // other ranks would carry on timing).
  double run_once(size_t a, size_t count) {
    const size_t es = size_of(type_), bytes = count * es;
    const size_t calls = burst_calls(bytes);
    if (calls > 1) burst_.resize(calls * bytes);
    char* first = calls > 1 ? burst_.data() : buf_.data();
    for (size_t k = 0; k < calls; ++k) memcpy(first + k * bytes, input_.data(), bytes);
    STRATA_MPI_CHECK(MPI_Barrier(comm_));
    double t0 = MPI_Wtime();
    for (size_t k = 0; k < calls; ++k) algorithms_[a]->run(first + k * bytes, count, type_);
    double dt = (MPI_Wtime() - t0) / calls;
    if (FLAGS_check)
      for (size_t k = 0; k < calls; ++k) check(first + k * bytes, count, names_[a]);
    return dt;
  }

  static size_t burst_calls(size_t bytes) {
    constexpr size_t kBurstBytes = 64 << 20;
    return std::max<size_t>(1, std::min<size_t>(std::max(1, FLAGS_burst), kBurstBytes / bytes));
  }

  void check(const char* result, size_t count, const std::string& name) {
    for (size_t i = 0; i < count; ++i) {
      double got = type_ == DataType::kFloat ? reinterpret_cast<const float*>(result)[i]
                                              : reinterpret_cast<const double*>(result)[i];
      if (got != expected_[i % kPeriod]) {
        std::ostringstream msg;
        msg << "allreduce_bench: " << name << " gave a wrong sum: element " << i << " of " << count << " is "
            << got << ", expected " << expected_[i % kPeriod];
        mpi_abort(msg.str());
      }
    }
  }

  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Allreduce>> algorithms_;
  DataType type_;
  MPI_Comm comm_;
  size_t max_count_ = 0;
  std::vector<char> buf_, input_, burst_;
  double expected_[kPeriod];
};

std::vector<size_t> sizes_from_flags(bool powers_of_two) {
  std::vector<size_t> sizes;
  if (!FLAGS_sizes.empty() && !powers_of_two) {
    for (const auto& s : SplitCommas(FLAGS_sizes)) sizes.push_back(ParseByteSize(s, "--sizes"));
    STRATA_REQUIRE(!sizes.empty()) << "--sizes lists no sizes";
  } else {
    size_t lo = ParseByteSize(FLAGS_min_bytes, "--min_bytes"), hi = ParseByteSize(FLAGS_max_bytes, "--max_bytes");
    sizes = GeometricSizes(lo, hi, powers_of_two ? 2 : FLAGS_factor);
  }
  return sizes;
}

std::vector<std::string> algorithms_from_flags() {
  std::vector<std::string> names;
  for (const auto& n : SplitCommas(FLAGS_algorithms)) {
    if (n == "mpi_all") {
      for (const char* m : {"mpi_linear", "mpi_nonoverlapping", "mpi_recursive_doubling", "mpi_ring",
                            "mpi_segmented_ring", "mpi_rabenseifner"})
        names.push_back(m);
      continue;
    }
    STRATA_REQUIRE(n == "hybrid" || is_allreduce_algorithm(n)) << unknown_allreduce_message(n);
    names.push_back(n);
  }
  STRATA_REQUIRE(!names.empty()) << "--algorithms names no algorithm";
  return names;
}

void print_header(const Topology& topology, const std::string& skew) {
  if (FLAGS_csv) {
    printf("ranks,dtype,bytes,algorithm,reps,median_us,p90_us,algbw_GBps,busbw_GBps,busbw_over_memcpy,winner\n");
  } else {
    printf("# allreduce_bench: %d ranks (%s), %s, times are the slowest rank's; * = fastest median at that size\n",
           g_size, topology.describe().c_str(), FLAGS_dtype.c_str());
    if (FLAGS_burst > 1)
      printf("# a rep is a burst of up to %d calls back to back (at most 64 MiB of them), timed per call\n",
             FLAGS_burst);
    printf("%s", skew.c_str());
    // Other work on the machine shows in every number; say how much there was.
    if (FILE* f = fopen("/proc/loadavg", "r")) {
      char line[128] = {0};
      if (fgets(line, sizeof line, f)) printf("# load average at start: %s", line);
      fclose(f);
    }
    printf("%10s  %-22s %5s %12s %12s %10s %10s %8s\n", "size", "algorithm", "reps", "median_us", "p90_us",
           "algbw_GB/s", "busbw_GB/s", "%memcpy");
  }
}

void print_result(const SizeResult& res) {
  size_t best = 0;
  const Timing* mem = nullptr;
  for (size_t a = 0; a < res.timings.size(); ++a) {
    if (res.timings[a].name == "memcpy") {
      mem = &res.timings[a];
      continue;
    }
    if (res.timings[a].median < res.timings[best].median) best = a;
  }
  const double bus_factor = g_size > 1 ? 2.0 * (g_size - 1) / g_size : 0.0;
  const double mem_bw = mem && mem->median > 0 ? res.bytes / mem->median : 0;
  for (size_t a = 0; a < res.timings.size(); ++a) {
    const Timing& t = res.timings[a];
    const bool is_mem = &t == mem;
    double algbw = t.median > 0 ? res.bytes / t.median / 1e9 : 0;
    double busbw = is_mem ? algbw : algbw * bus_factor;
    double frac = mem_bw > 0 ? busbw * 1e9 / mem_bw : 0;
    const bool win = !is_mem && a == best;
    if (FLAGS_csv) {
      printf("%d,%s,%zu,%s,%zu,%.2f,%.2f,%.4f,%.4f,%.4f,%d\n", g_size, FLAGS_dtype.c_str(), res.bytes, t.name.c_str(),
             t.seconds.size(), t.median * 1e6, t.p90 * 1e6, algbw, busbw, frac, win ? 1 : 0);
    } else {
      printf("%10s  %-22s %5zu %12.1f %12.1f %10.3f %10.3f %7.1f%%\n", size_text(res.bytes).c_str(),
             (t.name + (win ? " *" : "")).c_str(), t.seconds.size(), t.median * 1e6, t.p90 * 1e6, algbw, busbw,
             100 * frac);
    }
  }
  if (!FLAGS_csv) {
    if (!res.hybrid_choice.empty()) printf("%10s  %s\n", "", res.hybrid_choice.c_str());
    printf("\n");
  }
  fflush(stdout);
}

// Picks the winner of each size, letting the previous winner keep going while it is within the
// tolerance (noise should not flip the table back and forth), and turns the winners into rows.
std::vector<CrossoverRow> crossovers(const std::vector<SizeResult>& results) {
  std::vector<CrossoverRow> rows;
  std::string current;
  for (const auto& res : results) {
    const Timing* best = nullptr;
    const Timing* cur = nullptr;
    for (const auto& t : res.timings) {
      if (t.name == "memcpy") continue;
      if (!best || t.median < best->median) best = &t;
      if (t.name == current) cur = &t;
    }
    std::string winner = best->name;
    if (cur && cur->median <= best->median * (1 + FLAGS_tune_tolerance)) winner = current;
    if (winner != current) rows.push_back({res.bytes, winner});  // the previous row ends at its last win
    else rows.back().max_bytes = res.bytes;
    current = winner;
  }
  rows.back().max_bytes = CrossoverRow::kUnlimited;
  return rows;
}

// Seconds per byte of a 4 MiB memcpy on this rank (median of 9): shared memory's copy rate inside a node.
double measure_copy_seconds_per_byte() {
  constexpr size_t kBytes = 4 << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  std::vector<double> t;
  for (int i = 0; i <= 9; ++i) {
    const double t0 = MPI_Wtime();
    std::memcpy(b.data(), a.data(), kBytes);
    if (i > 0) t.push_back(MPI_Wtime() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] / kBytes;
}

// Seconds a message's phase waits, beyond its latency, when a busy thread shares this rank's core (as the
// computation does with a communication thread when a rank has no spare core): 4-byte BRD allreduces back to
// back, alone and then beside a spinning thread on the same core, the difference per phase.
double measure_wakeup_seconds(MPI_Comm comm) {
  auto brd = make_allreduce_algorithm("brd", comm);
  float x = 1;
  auto mean_seconds = [&] {
    constexpr int kReps = 200;
    brd->run(&x, 1);
    STRATA_MPI_CHECK(MPI_Barrier(comm));
    const double t0 = MPI_Wtime();
    for (int i = 0; i < kReps; ++i) brd->run(&x, 1);
    double t = (MPI_Wtime() - t0) / kReps;
    STRATA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm));
    return t;
  };
  const double alone = mean_seconds();
  cpu_set_t saved, one;
  const bool pinned = sched_getaffinity(0, sizeof saved, &saved) == 0;
  CPU_ZERO(&one);
  CPU_SET(std::max(0, sched_getcpu()), &one);
  if (pinned) sched_setaffinity(0, sizeof one, &one);
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    if (pinned) sched_setaffinity(0, sizeof one, &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const double beside = mean_seconds();
  stop = true;
  spinner.join();
  if (pinned) sched_setaffinity(0, sizeof saved, &saved);
  const int phases = std::max(1, ShapeAllreduce("brd", g_size, 4).num_phases());
  return std::max(0.0, beside - alone) / phases;
}

// --model: the three figures and what they predict, as table rows a file could hold.
int print_model(MPI_Comm comm) {
  int ok = 1;  // a --model_out that cannot be written ends every rank before measuring
  if (!FLAGS_model_out.empty() && g_rank == 0) {
    try {
      RequireWritableLocation(FLAGS_model_out, "--model_out");
    } catch (const std::exception& e) {
      fprintf(stderr, "allreduce_bench: %s\n", e.what());
      ok = 0;
    }
  }
  STRATA_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  if (!ok) return 1;
  const NetworkCostModel m = NetworkCostModel::measure(comm);
  // The figures an allreduce really meets: vhd timed back to back at sizes around the engine's chunks (--sizes
  // to choose others), alpha and beta fitted to its phases.
  NetworkCostModel fitted = m;
  std::vector<std::pair<double, double>> samples;
  double local_alpha = MachineSpec().local_alpha, wakeup = 0;
  if (g_size > 1) {
    std::vector<size_t> sizes = FLAGS_sizes.empty() ? std::vector<size_t>{256 << 10, 1 << 20, 4 << 20, 16 << 20}
                                                    : sizes_from_flags(false);
    // Back to back, as a communication thread runs a layer's chunks: the mean of a burst after one untimed run.
    auto vhd = make_allreduce_algorithm("vhd", comm);
    std::vector<float> buf(*std::max_element(sizes.begin(), sizes.end()) / sizeof(float) + 1, 1.0f);
    for (size_t bytes : sizes) {
      const size_t count = std::max<size_t>(1, bytes / sizeof(float));
      const int burst = std::max(FLAGS_min_reps, std::min(FLAGS_reps, static_cast<int>((64 << 20) / bytes)));
      vhd->run(buf.data(), count);
      STRATA_MPI_CHECK(MPI_Barrier(comm));
      const double t0 = MPI_Wtime();
      for (int i = 0; i < burst; ++i) vhd->run(buf.data(), count);
      double t = (MPI_Wtime() - t0) / burst;
      STRATA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm));
      samples.emplace_back(double(count * sizeof(float)), t);
    }
    if (g_rank == 0) fitted = NetworkCostModel::fit("vhd", g_size, samples, m.gamma, m.alpha);
    wakeup = measure_wakeup_seconds(comm);
    // Ranks that share a node: a 4-byte shm allreduce is its two flag waits.
    if (Topology::detect(comm).max_local_size() > 1) {
      Bench flags({"shm"}, DataType::kFloat, 4, comm);
      local_alpha = flags.measure(4).timings[0].median / 2;
    }
  }
  if (g_rank != 0) return 0;
  printf("# network cost model between rank 0 and rank %d (ping-pong): %s\n", g_size - 1, m.describe().c_str());
  if (!samples.empty()) {
    printf("# fitted to vhd back to back on %d ranks (", g_size);
    for (size_t i = 0; i < samples.size(); ++i)
      printf("%s%s %.1f us", i ? ", " : "", size_text(size_t(samples[i].first)).c_str(), samples[i].second * 1e6);
    printf("): %s\n", fitted.describe().c_str());
    printf("# a message beside a busy thread on the same core waits %.1f us longer\n", wakeup * 1e6);
  }
  printf("# built-in model (hier's network part on node counts without measured rows): %s\n",
         CrossoverTable::builtin_network_model().describe().c_str());
  CrossoverTable table("model");
  for (int nodes : {2, 3, 4, 5, 8, 16, 64, 256}) table.set(nodes, m.rows(nodes));
  printf("%s", table.to_text().c_str());
  if (!FLAGS_model_out.empty()) {
    MachineSpec machine;
    machine.origin = FLAGS_model_out;
    machine.alpha = fitted.alpha;
    machine.beta = fitted.beta;
    machine.gamma = fitted.gamma;
    machine.local_copy = measure_copy_seconds_per_byte();
    machine.local_alpha = local_alpha;
    machine.wakeup = wakeup;
    machine.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    machine.save(FLAGS_model_out);
    printf("# machine file for strata scale: %s (%s)\n", FLAGS_model_out.c_str(), machine.describe().c_str());
  }
  return 0;
}

// --skew: the spread of the ranks' exit times from MPI_Barrier over 500 barriers, median and 90th percentile
// (rank 0's line for the header).
std::string barrier_skew(MPI_Comm comm) {
  constexpr int kReps = 500;
  std::vector<double> spread, exits(g_rank == 0 ? g_size : 0);
  for (int i = 0; i < kReps; ++i) {
    STRATA_MPI_CHECK(MPI_Barrier(comm));
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t = ts.tv_sec + 1e-9 * ts.tv_nsec;
    STRATA_MPI_CHECK(MPI_Gather(&t, 1, MPI_DOUBLE, exits.data(), 1, MPI_DOUBLE, 0, comm));
    if (g_rank == 0) spread.push_back(*std::max_element(exits.begin(), exits.end()) -
                                      *std::min_element(exits.begin(), exits.end()));
  }
  if (g_rank != 0) return "";
  char line[160];
  snprintf(line, sizeof line,
           "# barrier exit skew (last rank out - first, %d barriers): median %.1f us, p90 %.1f us\n", kReps,
           percentile(spread, 0.5) * 1e6, percentile(spread, 0.9) * 1e6);
  return line;
}

int run(MPI_Comm comm) {
  if (FLAGS_model) return print_model(comm);
  // Setup: everything that can fail on bad input happens here, on every rank, before any timing.
  std::string error;
  std::vector<std::string> names;
  std::vector<size_t> sizes;
  std::unique_ptr<Bench> bench;
  DataType type = DataType::kFloat;
  try {
    type = data_type_from_name(FLAGS_dtype);
    STRATA_REQUIRE(FLAGS_reps >= 1 && FLAGS_min_reps >= 1 && FLAGS_warmup >= 0 && FLAGS_burst >= 1)
        << "--reps, --min_reps and --burst must be >= 1 and --warmup >= 0";
    if (FLAGS_tune) {
      names = {"linear", "brb", "brd", "vhd", "vhd_seg", "ring", "ring_seg", "shm", "hier"};
      STRATA_REQUIRE(FLAGS_sizes.empty()) << "--tune measures powers of two from --min_bytes to --max_bytes; "
                                             "drop --sizes";
    } else {
      names = algorithms_from_flags();
    }
    sizes = sizes_from_flags(FLAGS_tune);
    bench = std::make_unique<Bench>(names, type, *std::max_element(sizes.begin(), sizes.end()), comm);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Agree on failure, and let the lowest failing rank say why: every rank exits 1, nobody waits.
  int first_bad = error.empty() ? g_size : g_rank, lowest = g_size;
  STRATA_MPI_CHECK(MPI_Allreduce(&first_bad, &lowest, 1, MPI_INT, MPI_MIN, comm));
  if (lowest < g_size) {
    if (g_rank == lowest) fprintf(stderr, "allreduce_bench: %s\n", error.c_str());
    return 1;
  }

  const Topology topology = Topology::detect(comm);
  const std::string skew = FLAGS_skew && !FLAGS_csv ? barrier_skew(comm) : "";
  if (g_rank == 0) print_header(topology, skew);
  std::vector<SizeResult> results;
  for (size_t bytes : sizes) {
    results.push_back(bench->measure(bytes));
    if (g_rank == 0) print_result(results.back());
  }
  if (!FLAGS_tune) return 0;

  // Rank 0 writes the table; a failure to write is reported to every rank.
  int ok = 1;
  if (g_rank == 0) {
    try {
      CrossoverTable table(FLAGS_tune_out);
      if (std::ifstream(FLAGS_tune_out)) table = CrossoverTable::load(FLAGS_tune_out);
      // Ranks spread evenly over several nodes get rows of their layout (HxL); otherwise rows of their count.
      std::string key = std::to_string(g_size);
      if (topology.nodes() > 1 && topology.uniform()) {
        table.set_layout(topology.nodes(), topology.local_size(), crossovers(results));
        key = std::to_string(topology.nodes()) + "x" + std::to_string(topology.local_size());
      } else {
        table.set(g_size, crossovers(results));
      }
      table.save(FLAGS_tune_out);
      printf("# wrote the crossovers for ranks %s (%s) to %s:\n%s", key.c_str(), topology.describe().c_str(),
             FLAGS_tune_out.c_str(), table.to_text().c_str());
    } catch (const std::exception& e) {
      fprintf(stderr, "allreduce_bench: %s\n", e.what());
      ok = 0;
    }
  }
  STRATA_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  gflags::SetUsageMessage("times allreduce algorithms under mpirun; see docs/allreduce.md");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  // Defaults that suit this tool (an mpirun --mca flag still wins): waiting ranks yield their core, and
  // Open MPI's dynamic rules are on so that its forced algorithms (mpi_ring, ...) can be compared.
  strata::Communicator::set_default_mpi_tuning();
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  int rc;
  {
    strata::Communicator comm(&argc, &argv, 0);
    strata::g_rank = comm.rank();
    strata::g_size = comm.size();
    rc = strata::run(comm.world());
  }
  return rc;
}
