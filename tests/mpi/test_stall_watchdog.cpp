// The stall watchdog (strata/comm/stall_watchdog.hpp) on however many ranks mpirun started: a rank that comes
// late to a collective is named, with the last collective it entered, by every rank that waits for it; nothing is
// reported while the ranks keep up; and the limits are checked. (A stopped rank, which cannot answer, and the
// abort that ends the job are tests/fault_matrix.sh's stop cases: they end the process.)
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi/mpi_test_util.hpp"
#include "strata/common.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/stall_watchdog.hpp"

namespace strata {
namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

class StallWatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  void TearDown() override { MPI_Comm_free(&comm_); }

  // Runs `calls` ring allreduces of 1,000 floats under a watchdog (warning after warn_s), the last rank entering
  // call number `late_call` (1-based) late_s seconds late; returns this rank's reports, and checks every sum.
  std::vector<StallReport> run(double warn_s, int calls, int late_call, double late_s) {
    std::vector<StallReport> reports;
    std::mutex mu;
    StallLimits limits;
    limits.warn_seconds = warn_s;
    const int n = world_size(), last = n - 1;
    bool sums_ok = true;
    {
      StallWatchdog dog(comm_, limits, {"the test's thread"}, [&](const StallReport& r) {
        std::lock_guard<std::mutex> lock(mu);
        reports.push_back(r);
      });
      WatchedAllreduce ar(make_allreduce_algorithm("ring", comm_), StallWatch{&dog, 0});
      std::vector<float> buf(1000);
      for (int call = 1; call <= calls; ++call) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>((i + world_rank()) % 7);
        if (call == late_call && world_rank() == last)
          std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
        ar.run(buf.data(), buf.size());
        for (size_t i = 0; i < buf.size(); ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r) want += static_cast<float>((i + r) % 7);
          sums_ok = sums_ok && buf[i] == want;
        }
      }
      // Every rank's watchdog answers until all are done with their checks.
      MPI_Barrier(comm_);
    }
    EXPECT_TRUE(all_ranks(sums_ok)) << "the watched allreduce gave wrong sums";
    return reports;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
};

TEST_F(StallWatchdogTest, NamesTheLateRankOnEveryWaitingRank) {
  const int n = world_size(), last = n - 1;
  // Call 3 of 4: the last rank comes 1.5 s late; the others report after 0.25 s, and again every 0.25 s.
  const std::vector<StallReport> reports = run(0.25, 4, 3, 1.5);
  bool ok = true;
  if (world_rank() != last) {
    ok = !reports.empty();
    EXPECT_FALSE(reports.empty()) << "rank " << world_rank() << " waited 1.5 s and reported nothing";
    bool alone = false;  // some report names the late rank only (early ones may catch others still entering)
    bool early = false;  // some report came while the late rank still slept
    for (const StallReport& r : reports) {
      const std::string text = r.text();
      EXPECT_EQ(r.rank, world_rank()) << text;
      EXPECT_EQ(r.channel, "the test's thread") << text;
      EXPECT_EQ(r.collective, 3u) << text;
      EXPECT_GE(r.waited_seconds, 0.25) << text;
      // The late rank's watchdog answers while its thread sleeps: it is behind, having entered call 2 last. A rank
      // named with it can only be one that has not entered call 3 yet either (on a loaded machine, a rank that
      // has not been scheduled since call 2). Under heavy load an answer may miss its deadline; such a rank is
      // named as not answering.
      bool named = false;
      for (const auto& b : r.behind) {
        EXPECT_EQ(b.second, 2u) << text;
        named = named || b.first == last;
      }
      for (int q : r.not_answering) named = named || q == last;
      // Asked before the late rank woke (the answers' deadline is 0.5 s): it must be named. Later it may have
      // entered by the time it answers.
      if (r.waited_seconds + 0.5 < 1.5 - 0.1) {
        EXPECT_TRUE(named) << "rank " << last << " is not named: " << text;
        EXPECT_NE(text.find("rank " + std::to_string(last) + " ("), std::string::npos) << text;
        ok = ok && named;
        early = true;
      }
      alone = alone || (named && r.behind.size() + r.not_answering.size() == 1);
    }
    EXPECT_TRUE(early) << "no report within 0.9 s of a 0.25 s warning time";
    ok = ok && early;
    EXPECT_TRUE(alone) << "every report names more ranks than the late one, the last: " << reports.back().text();
    ok = ok && alone;
  } else if (n == 1) {
    // Alone, the rank waits for nobody: a 1.5 s sleep outside a collective is no stall.
    EXPECT_TRUE(reports.empty());
  }
  EXPECT_TRUE(all_ranks(ok));
}

TEST_F(StallWatchdogTest, QuietWhileTheRanksKeepUp) {
  // 20 calls, nobody late; a warning time far above a call's duration.
  const std::vector<StallReport> reports = run(5.0, 20, 0, 0);
  EXPECT_TRUE(reports.empty()) << reports.front().text();
}

TEST(StallReportText, NamesWhoIsMissing) {
  StallReport r;
  r.rank = 0;
  r.channel = "communication thread 0";
  r.collective = 57;
  r.waited_seconds = 2.04;
  r.not_answering = {1};
  r.behind = {{2, 56}};
  EXPECT_EQ(r.text(), "collective #57 on communication thread 0 has waited 2.0 s; not arrived: rank 1 (not "
                      "answering: stopped, or its process cannot run), rank 2 (last entered #56)");
  r.not_answering.clear();
  r.behind.clear();
  EXPECT_EQ(r.text(), "collective #57 on communication thread 0 has waited 2.0 s; every rank has entered it (the "
                      "wait is inside the collective)");
}

TEST(StallLimits, CheckedAndNamed) {
  StallLimits l;
  EXPECT_EQ(l.warn_seconds, 60);
  EXPECT_EQ(l.abort_seconds, 0);
  l.abort_seconds = 10;  // below the warning time
  EXPECT_THROW(l.check(), Error);
  l.warn_seconds = 0;  // an abort time needs a warning time
  EXPECT_THROW(l.check(), Error);
  l.warn_seconds = 5;
  EXPECT_NO_THROW(l.check());

  setenv("STRATA_STALL_WARN_SECONDS", "2.5", 1);
  setenv("STRATA_STALL_ABORT_SECONDS", "7", 1);
  const StallLimits e = StallLimits().with_environment();
  EXPECT_EQ(e.warn_seconds, 2.5);
  EXPECT_EQ(e.abort_seconds, 7);
  setenv("STRATA_STALL_ABORT_SECONDS", "1", 1);  // below the warning time
  try {
    StallLimits().with_environment();
    ADD_FAILURE() << "an abort time below the warning time was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("STRATA_STALL_ABORT_SECONDS"), std::string::npos) << err.what();
  }
  setenv("STRATA_STALL_WARN_SECONDS", "soon", 1);
  try {
    StallLimits().with_environment();
    ADD_FAILURE() << "a warning time 'soon' was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("STRATA_STALL_WARN_SECONDS must be a number of seconds"),
              std::string::npos)
        << err.what();
  }
  unsetenv("STRATA_STALL_WARN_SECONDS");
  unsetenv("STRATA_STALL_ABORT_SECONDS");
}

}  // namespace
}  // namespace strata
