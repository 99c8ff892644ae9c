// The MPI side of a Strata process: MPI brought up with the thread level the gradient engine needs, this
// rank's place in the job, and one private communicator per communication thread.
//
// Why one communicator per thread: MPI matches messages by (communicator, source, tag) in posting order.
// Two threads running collectives on the same communicator could receive each other's messages; on
// duplicated communicators they never can, whatever the interleaving.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/comm/stall_watchdog.hpp"
#include "strata/comm/topology.hpp"

namespace strata {

// Checks the return code of an MPI call. MPI errors are not user errors that a tool can report and
// carry on from: the other ranks are already waiting in a matching call, so the only way to end the job
// without a hang is MPI_Abort. The message names the call, where it was made and MPI's own explanation.
void mpi_check(int rc, const char* call, const char* file, int line);
#define STRATA_MPI_CHECK(call) ::strata::mpi_check((call), #call, __FILE__, __LINE__)

// Ends the whole job (every rank) with a message, from any rank. For errors that only one rank can see
// in the middle of communication, where returning would leave the other ranks waiting forever.
[[noreturn]] void mpi_abort(const std::string& message, int exit_code = 1);

class Communicator {
 public:
  // Brings MPI up (unless the caller already has) asking for MPI_THREAD_MULTIPLE, and duplicates
  // MPI_COMM_WORLD once per communication thread plus once for the calling (main) thread.
  //   comm_threads = 0: only the main thread communicates; any thread level will do.
  //   comm_threads = 1: one communication thread; needs MPI_THREAD_SERIALIZED at least.
  //   comm_threads > 1: needs MPI_THREAD_MULTIPLE; with only SERIALIZED provided it falls back to one
  //                     communication thread (num_comm_threads() says so) and logs a warning.
  // Below the level it needs, it ends the job with a clear message. Every rank must construct it
  // with the same comm_threads (MPI_Comm_dup is collective).
  Communicator(int* argc, char*** argv, int comm_threads = 0);
  // For a process where MPI is already initialised (tests, embedding): same as above, no MPI_Init.
  explicit Communicator(int comm_threads = 0);
  ~Communicator();  // frees the duplicated communicators; finalizes MPI if this object initialised it
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The main thread's private communicator (a duplicate of MPI_COMM_WORLD).
  MPI_Comm world() const { return main_comm_; }
  // Communication thread i's private communicator, 0 <= i < num_comm_threads().
  MPI_Comm thread_comm(int i) const;
  int num_comm_threads() const { return static_cast<int>(thread_comms_.size()); }
  // The thread level MPI provided (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
  int thread_level() const { return provided_; }
  // Where the ranks run (Topology::detect of MPI_COMM_WORLD): which share a machine, this rank's place there.
  const Topology& topology() const { return topology_; }

  // Starts the stall watchdog (stall_watchdog.hpp) over the job, with a channel for the main thread's communicator
  // and one per communication thread's. Collective. Does nothing on one rank or with limits.warn_seconds 0, and
  // (with a warning) where MPI does not provide MPI_THREAD_MULTIPLE, which its thread needs.
  void start_watchdog(const StallLimits& limits);
  // Where a collective on `comm` reports to: the watchdog and comm's channel, when comm is one of this object's
  // communicators and the watchdog runs; else nothing.
  StallWatch watch(MPI_Comm comm) const;
  // `a` such that the watchdog sees its calls (when watch(a->comm()) has a watchdog; else `a` itself).
  std::unique_ptr<Allreduce> watched(std::unique_ptr<Allreduce> a) const;

  // Sets Open MPI defaults that suit Strata's tools unless the user chose otherwise (an mpirun --mca
  // flag or an OMPI_MCA_* variable always wins). Must run before MPI is initialised. Today: waiting
  // threads yield the core (mpi_yield_when_idle=1), because on a machine where ranks or compute threads
  // share cores a spinning MPI wait takes half the core from the work (docs/allreduce.md); and Open MPI's
  // dynamic rules are on, so its algorithms can be forced by name (coll_tuned_use_dynamic_rules=1).
  static void set_default_mpi_tuning();

 private:
  void setup(int requested_threads);

  bool owns_mpi_ = false;
  int provided_ = MPI_THREAD_SINGLE;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm main_comm_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> thread_comms_;
  Topology topology_;
  std::unique_ptr<StallWatchdog> watchdog_;  // channel 0: main_comm_; 1 + i: thread_comms_[i]
};

// A human name for an MPI thread level ("MPI_THREAD_MULTIPLE").
std::string thread_level_name(int level);

}  // namespace strata
