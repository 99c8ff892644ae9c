// The stall watchdog (Horovod's stall check): a collective that waits longer than a set time makes its rank log
// which ranks have not arrived, and after a longer limit (off by default) the job ends with one message naming
// them.
//
// How, Gloo's way (a plan made once, small messages at run time): every rank counts the collectives it enters on
// each watched communicator, a "channel" (one per thread that runs collectives, so the counts agree across ranks).
// A thread of the watchdog's own, on a communicator of its own, answers other ranks' questions with these counts
// and watches this rank's waits. When one passes the limit it asks every other rank, with nonblocking messages and
// a deadline: a rank whose count is below the waiting collective's number has not arrived, and a rank that does
// not answer at all (stopped by SIGSTOP, or its process wedged) is named as not answering. So a stopped rank cannot
// silence its peers: their watchdog threads never wait on it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/comm/allreduce.hpp"

namespace strata {

struct StallLimits {
  // A collective waiting this long is logged on its rank with the ranks that have not arrived, and again every
  // warn_seconds while it waits. <= 0: no watchdog.
  double warn_seconds = 60;
  // A collective waiting this long ends the job with one message naming the ranks that have not arrived. 0: never.
  double abort_seconds = 0;

  // These with STRATA_STALL_WARN_SECONDS and STRATA_STALL_ABORT_SECONDS from the environment over them (each
  // when set), the settings' names for users (as Horovod's HOROVOD_STALL_CHECK_TIME_SECONDS). Throws strata::Error
  // naming the variable for a value that is not a number of seconds, or out of range (check()).
  StallLimits with_environment() const;
  // Throws strata::Error unless both are finite and not negative, and abort_seconds (when set) is at least
  // warn_seconds.
  void check() const;
};

// What a rank found when one of its collectives stalled (one line of the log, or the abort message).
struct StallReport {
  int rank = 0;               // the waiting rank
  std::string channel;        // the channel's name ("communication thread 0")
  uint64_t collective = 0;    // the waiting collective's number on that channel (1 = the first)
  double waited_seconds = 0;
  std::vector<int> not_answering;                     // ranks that gave no answer before the deadline
  std::vector<std::pair<int, uint64_t>> behind;       // ranks that answered, with the last collective they entered

  // "collective #57 on communication thread 0 has waited 2.0 s; not arrived: rank 1 (not answering: stopped, or
  // its process cannot run), rank 2 (last entered #56)".
  std::string text() const;
};

class StallWatchdog {
 public:
  // Collective over comm, which it duplicates for its own messages; starts the watchdog thread. The channels are
  // named in the same order on every rank. Needs MPI_THREAD_MULTIPLE (the thread calls MPI beside the others).
  // report: what to do with each warning (default: log it); the abort is one message and MPI_Abort (mpi_abort).
  StallWatchdog(MPI_Comm comm, const StallLimits& limits, std::vector<std::string> channels,
                std::function<void(const StallReport&)> report = nullptr);
  ~StallWatchdog();  // stops the thread (local: no other rank takes part)
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The calling thread enters (and leaves) a collective on `channel`. Cheap: a few atomic operations and a clock
  // read on entering, one store on leaving.
  void enter(int channel);
  void leave(int channel);

 private:
  struct Channel;
  struct Peer;
  void loop();
  void serve();                                    // answers the questions that have come in
  void check(double now);                          // this rank's waits
  StallReport ask(int channel, uint64_t collective, double waited);  // asks every other rank, until the deadline
  void progress(std::vector<uint64_t>* out) const;  // per channel: collectives entered, and whether inside one
  void shutdown_messages();
  [[noreturn]] void abort_job(const StallReport& r);

  StallLimits limits_;
  std::function<void(const StallReport&)> report_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double period_ = 0.05, deadline_ = 1;            // seconds: between checks; for the answers
  std::unique_ptr<Channel[]> channel_state_;
  std::vector<std::string> channels_;
  std::vector<Peer> peers_;
  MPI_Request question_ = MPI_REQUEST_NULL;        // the standing receive of other ranks' questions
  int question_buf_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The part of a communicator a collective reports to: a watchdog and a channel, or nothing (watchdog null).
struct StallWatch {
  StallWatchdog* watchdog = nullptr;
  int channel = -1;

  // Marks a collective from construction to destruction.
  class Scope {
   public:
    explicit Scope(const StallWatch& w) : watchdog_(w.watchdog), channel_(w.channel) {
      if (watchdog_) watchdog_->enter(channel_);
    }
    ~Scope() {
      if (watchdog_) watchdog_->leave(channel_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StallWatchdog* const watchdog_;
    const int channel_;
  };
};

// An allreduce whose calls a watchdog sees; otherwise the algorithm it wraps (name, explain, results).
class WatchedAllreduce : public Allreduce {
 public:
  WatchedAllreduce(std::unique_ptr<Allreduce> inner, StallWatch watch);
  std::string name() const override { return inner_->name(); }
  std::string explain(size_t bytes) const override { return inner_->explain(bytes); }
  void run(void* buf, size_t count, DataType type) override {
    StallWatch::Scope scope(watch_);
    inner_->run(buf, count, type);
  }
  using Allreduce::run;

 private:
  std::unique_ptr<Allreduce> inner_;
  StallWatch watch_;
};

}  // namespace strata
