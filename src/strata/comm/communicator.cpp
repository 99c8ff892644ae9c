#include "strata/comm/communicator.hpp"

#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace strata {

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof(text), "error code %d", rc);
  mpi_abort(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + text);
}

void mpi_abort(const std::string& message, int exit_code) {
  int rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "strata: rank %d: %s\n", rank, message.c_str());
  fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown thread level " + std::to_string(level);
  }
}

void Communicator::set_default_mpi_tuning() {
  // setenv(..., 0) keeps a value mpirun or the user already put there.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  // The forced Open MPI algorithms (mpi_ring, ...; comm_param.algorithm in a solver) are only honoured with
  // dynamic rules on. Without a forced algorithm or a rules file Open MPI makes its fixed choices as before.
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
}

Communicator::Communicator(int* argc, char*** argv, int comm_threads) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided_);
    if (rc != MPI_SUCCESS) {
      fprintf(stderr, "strata: MPI_Init_thread failed (code %d)\n", rc);
      std::exit(1);
    }
    owns_mpi_ = true;
  }
  setup(comm_threads);
}

Communicator::Communicator(int comm_threads) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    fprintf(stderr, "strata: Communicator(comm_threads) needs MPI initialised; use the (argc, argv) form\n");
    std::exit(1);
  }
  setup(comm_threads);
}

void Communicator::setup(int comm_threads) {
  CHECK_GE(comm_threads, 0);
  STRATA_MPI_CHECK(MPI_Query_thread(&provided_));
  // Errors come back as codes that STRATA_MPI_CHECK turns into one message and MPI_Abort, instead of
  // Open MPI's default handler printing a stack of internals. Duplicates inherit the handler.
  STRATA_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  STRATA_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));

  int usable = comm_threads;
  if (comm_threads > 1 && provided_ < MPI_THREAD_MULTIPLE) {
    if (provided_ >= MPI_THREAD_SERIALIZED) {
      usable = 1;
      if (rank_ == 0)
        LOG(WARNING) << "MPI provides only " << thread_level_name(provided_) << "; using one communication "
                     << "thread instead of " << comm_threads;
    } else {
      mpi_abort("MPI provides only " + thread_level_name(provided_) + ", but " +
                std::to_string(comm_threads) + " communication threads need MPI_THREAD_MULTIPLE " +
                "(or MPI_THREAD_SERIALIZED for one)");
    }
  } else if (comm_threads == 1 && provided_ < MPI_THREAD_SERIALIZED) {
    mpi_abort("MPI provides only " + thread_level_name(provided_) +
              ", but a communication thread needs MPI_THREAD_SERIALIZED or better");
  }

  STRATA_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &main_comm_));
  thread_comms_.assign(usable, MPI_COMM_NULL);
  for (MPI_Comm& c : thread_comms_) STRATA_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  topology_ = Topology::detect(main_comm_);
}

void Communicator::start_watchdog(const StallLimits& limits) {
  limits.check();
  if (size_ == 1 || limits.warn_seconds <= 0) return;
  if (provided_ < MPI_THREAD_MULTIPLE) {
    LOG_IF(WARNING, rank_ == 0) << "no stall watchdog: MPI provides only " << thread_level_name(provided_)
                                << " and the watchdog's thread needs MPI_THREAD_MULTIPLE";
    return;
  }
  std::vector<std::string> channels{"the main thread"};
  for (size_t i = 0; i < thread_comms_.size(); ++i) channels.push_back("communication thread " + std::to_string(i));
  watchdog_ = std::make_unique<StallWatchdog>(MPI_COMM_WORLD, limits, std::move(channels));
}

StallWatch Communicator::watch(MPI_Comm comm) const {
  if (!watchdog_) return {};
  if (comm == main_comm_) return {watchdog_.get(), 0};
  for (size_t i = 0; i < thread_comms_.size(); ++i)
    if (comm == thread_comms_[i]) return {watchdog_.get(), 1 + static_cast<int>(i)};
  return {};
}

std::unique_ptr<Allreduce> Communicator::watched(std::unique_ptr<Allreduce> a) const {
  const StallWatch w = watch(a->comm());
  if (!w.watchdog) return a;
  return std::make_unique<WatchedAllreduce>(std::move(a), w);
}

MPI_Comm Communicator::thread_comm(int i) const {
  CHECK(i >= 0 && i < num_comm_threads()) << "no communication thread " << i << " (have "
                                          << num_comm_threads() << ")";
  return thread_comms_[i];
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  watchdog_.reset();  // its thread uses MPI
  for (MPI_Comm& c : thread_comms_) MPI_Comm_free(&c);
  if (main_comm_ != MPI_COMM_NULL) MPI_Comm_free(&main_comm_);
  if (owns_mpi_) MPI_Finalize();
}

}  // namespace strata
