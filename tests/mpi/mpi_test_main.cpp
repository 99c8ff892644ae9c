// Entry point of bin/strata_mpi_tests, run under mpirun (ctest: 1, 2, 3, 4, 5, 7 and 8 ranks).
//
// Every rank runs every test; rank 0 prints the usual GoogleTest output and the other ranks print only
// their failures, prefixed with the rank. The process exits non-zero on every rank if any rank failed.
// A watchdog ends the whole job if the run takes longer than STRATA_MPI_TEST_TIMEOUT seconds (default
// 300), so a test that leaves a rank waiting in a collective fails instead of hanging CI.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "strata/comm/communicator.hpp"
#include "strata/syncedmem.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
            r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  // Waiting ranks yield their core (oversubscribed runs crawl otherwise), and Open MPI's dynamic rules
  // are on so the tests can force its algorithms (mpi_ring, ...). mpirun --mca flags still win.
  strata::Communicator::set_default_mpi_tuning();
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "MPI_Init_thread failed\n");
    return 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  strata::SyncedMemory::set_poison_fresh_writes(true);  // as in tests/test_main.cpp

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }

  const char* limit_env = getenv("STRATA_MPI_TEST_TIMEOUT");
  const int limit_s = limit_env ? atoi(limit_env) : 300;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(limit_s), [&] { return done; })) {
      fprintf(stderr, "[rank %d] strata_mpi_tests: still running after %d s (a rank is probably waiting in a "
              "collective another rank left); aborting the job\n", rank, limit_s);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  });

  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();

  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) fprintf(stderr, "strata_mpi_tests: a rank other than 0 failed\n");
  MPI_Finalize();
  return any_failed;
}
