#include "strata/comm/stall_watchdog.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "strata/common.hpp"
#include "strata/comm/communicator.hpp"

namespace strata {

namespace {

constexpr int kQuestionTag = 1, kAnswerTag = 2;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// A number of seconds from the environment variable `name`, if set.
bool env_seconds(const char* name, double* out) {
  const char* v = std::getenv(name);
  if (!v) return false;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  STRATA_REQUIRE(end != v && *end == 0 && std::isfinite(d) && d >= 0)
      << name << " must be a number of seconds (0 or more), got '" << v << "'";
  *out = d;
  return true;
}

std::string seconds_text(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

StallLimits StallLimits::with_environment() const {
  StallLimits l = *this;
  env_seconds("STRATA_STALL_WARN_SECONDS", &l.warn_seconds);
  env_seconds("STRATA_STALL_ABORT_SECONDS", &l.abort_seconds);
  l.check();
  return l;
}

void StallLimits::check() const {
  STRATA_REQUIRE(std::isfinite(warn_seconds) && warn_seconds >= 0)
      << "the stall warning time (STRATA_STALL_WARN_SECONDS) must be a number of seconds (0 or more), got "
      << warn_seconds;
  STRATA_REQUIRE(std::isfinite(abort_seconds) && abort_seconds >= 0)
      << "the stall abort time (STRATA_STALL_ABORT_SECONDS) must be a number of seconds (0 or more), got "
      << abort_seconds;
  STRATA_REQUIRE(abort_seconds == 0 || (warn_seconds > 0 && abort_seconds >= warn_seconds))
      << "the stall abort time (STRATA_STALL_ABORT_SECONDS, " << abort_seconds
      << " s) must be 0 (never) or at least the warning time (STRATA_STALL_WARN_SECONDS, " << warn_seconds
      << " s), which must then be set";
}

std::string StallReport::text() const {
  std::ostringstream s;
  s << "collective #" << collective << " on " << channel << " has waited "
    << seconds_text(waited_seconds) << "; ";
  if (not_answering.empty() && behind.empty()) {
    s << "every rank has entered it (the wait is inside the collective)";
    return s.str();
  }
  s << "not arrived: ";
  bool first = true;
  for (int q : not_answering) {
    s << (first ? "" : ", ") << "rank " << q << " (not answering: stopped, or its process cannot run)";
    first = false;
  }
  for (const auto& [q, entered] : behind) {
    s << (first ? "" : ", ") << "rank " << q << " (last entered #" << entered << ")";
    first = false;
  }
  return s.str();
}

// One channel's state, on a cache line of its own: the thread of that channel writes it on every collective.
struct alignas(64) StallWatchdog::Channel {
  std::atomic<uint64_t> entered{0};  // collectives entered so far
  std::atomic<int64_t> since_ns{0};  // when the current one was entered (steady clock), 0 outside one
  // The watchdog thread's own: the collective it is watching, and when it next reports or ends the job.
  uint64_t watched = 0;
  double next_warn = 0, abort_at = 0;
};

// The messages with one other rank. At most one question to it is out at a time: a late answer (from a rank
// that was stopped and runs again) completes the receive still posted for it.
struct StallWatchdog::Peer {
  MPI_Request question_send = MPI_REQUEST_NULL, answer_recv = MPI_REQUEST_NULL, answer_send = MPI_REQUEST_NULL;
  int question = 0;
  std::vector<uint64_t> answer, reply;  // theirs to us, ours to them
};

StallWatchdog::StallWatchdog(MPI_Comm comm, const StallLimits& limits, std::vector<std::string> channels,
                             std::function<void(const StallReport&)> report)
    : limits_(limits), report_(std::move(report)), channels_(std::move(channels)) {
  limits_.check();
  STRATA_REQUIRE(limits_.warn_seconds > 0) << "a stall watchdog needs a warning time";
  if (!report_) report_ = [](const StallReport& r) { LOG(WARNING) << "Stall on rank " << r.rank << ": " << r.text(); };
  STRATA_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  STRATA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // Checks often enough that a report comes within a tenth of the limit; answers have a deadline of half the
  // limit, between 0.5 and 2 s: long enough for a rank whose cores are busy to be scheduled.
  period_ = std::min(0.05, std::max(0.001, limits_.warn_seconds / 10));
  deadline_ = std::min(2.0, std::max(0.5, limits_.warn_seconds / 2));
  channel_state_ = std::make_unique<Channel[]>(channels_.size());
  peers_.resize(size_);
  for (Peer& p : peers_) {
    p.answer.assign(2 * channels_.size(), 0);
    p.reply.assign(2 * channels_.size(), 0);
  }
  STRATA_MPI_CHECK(MPI_Irecv(&question_buf_, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, comm_, &question_));
  thread_ = std::thread([this] { loop(); });
}

StallWatchdog::~StallWatchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void StallWatchdog::enter(int channel) {
  Channel& c = channel_state_[channel];
  c.entered.fetch_add(1, std::memory_order_relaxed);
  c.since_ns.store(now_ns(), std::memory_order_release);
}

void StallWatchdog::leave(int channel) { channel_state_[channel].since_ns.store(0, std::memory_order_release); }

void StallWatchdog::progress(std::vector<uint64_t>* out) const {
  for (size_t c = 0; c < channels_.size(); ++c) {
    const bool inside = channel_state_[c].since_ns.load(std::memory_order_acquire) != 0;
    (*out)[2 * c] = channel_state_[c].entered.load(std::memory_order_acquire);
    (*out)[2 * c + 1] = inside;
  }
}

void StallWatchdog::loop() {
  // Two seconds more than the period between checks: this process did not run (a rank stopped and
  // continued, or one that mpirun continues to end it after another rank ended the job). The other ranks were not
  // what kept its collectives waiting then, so their waits start again after the gap (unless one ended meanwhile).
  constexpr double kAbsentAfter = 2.0;
  double last = now_seconds();
  while (!stop_.load()) {
    serve();
    const double now = now_seconds(), absent = now - last - period_;
    if (absent >= kAbsentAfter) {
      for (size_t c = 0; c < channels_.size(); ++c) {
        int64_t since = channel_state_[c].since_ns.load(std::memory_order_acquire);
        if (since != 0)
          channel_state_[c].since_ns.compare_exchange_strong(since, since + static_cast<int64_t>(absent * 1e9));
      }
    }
    check(now);
    last = now_seconds();  // after the check: waiting for the answers to its questions is time this process ran
    sleep_seconds(period_);
  }
  shutdown_messages();
}

void StallWatchdog::serve() {
  for (;;) {
    int done = 0;
    MPI_Status status;
    STRATA_MPI_CHECK(MPI_Test(&question_, &done, &status));
    if (!done) return;
    Peer& p = peers_[status.MPI_SOURCE];
    int sent = 1;
    if (p.answer_send != MPI_REQUEST_NULL) STRATA_MPI_CHECK(MPI_Test(&p.answer_send, &sent, MPI_STATUS_IGNORE));
    // While our last answer to that rank is still in flight it will take the place of this one.
    if (sent) {
      progress(&p.reply);
      STRATA_MPI_CHECK(MPI_Isend(p.reply.data(), static_cast<int>(p.reply.size()), MPI_UINT64_T,
                                 status.MPI_SOURCE, kAnswerTag, comm_, &p.answer_send));
    }
    STRATA_MPI_CHECK(MPI_Irecv(&question_buf_, 1, MPI_INT, MPI_ANY_SOURCE, kQuestionTag, comm_, &question_));
  }
}

void StallWatchdog::check(double now) {
  for (size_t c = 0; c < channels_.size(); ++c) {
    Channel& ch = channel_state_[c];
    const int64_t since = ch.since_ns.load(std::memory_order_acquire);
    if (since == 0) continue;
    const uint64_t collective = ch.entered.load(std::memory_order_acquire);
    const double waited = now - since * 1e-9;
    if (collective != ch.watched) {
      ch.watched = collective;
      ch.next_warn = limits_.warn_seconds;
      ch.abort_at = limits_.abort_seconds;
    }
    if (limits_.abort_seconds > 0 && waited >= ch.abort_at) {
      StallReport r = ask(static_cast<int>(c), collective, waited);
      // One message for the job: the lowest rank among those waiting here ends it; the others give it a while
      // (its own check may come a period later) before they end the job themselves.
      int lowest = rank_;
      std::vector<bool> named(size_, false);
      for (int q : r.not_answering) named[q] = true;
      for (const auto& b : r.behind) named[b.first] = true;
      for (int q = 0; q < rank_; ++q)
        if (!named[q]) lowest = std::min(lowest, q);
      if (lowest == rank_ || waited >= limits_.abort_seconds + 2 * deadline_ + 1) abort_job(r);
      ch.abort_at = limits_.abort_seconds + 2 * deadline_ + 1;
      continue;
    }
    if (waited >= ch.next_warn) {
      report_(ask(static_cast<int>(c), collective, waited));
      while (ch.next_warn <= waited) ch.next_warn += limits_.warn_seconds;
    }
  }
}

StallReport StallWatchdog::ask(int channel, uint64_t collective, double waited) {
  for (int q = 0; q < size_; ++q) {
    Peer& p = peers_[q];
    if (q == rank_) continue;
    // An answer to an earlier question that came after its deadline is stale: ask again. One that has not come
    // yet stands for this question too.
    int stale = 0;
    if (p.answer_recv != MPI_REQUEST_NULL) STRATA_MPI_CHECK(MPI_Test(&p.answer_recv, &stale, MPI_STATUS_IGNORE));
    if (p.answer_recv != MPI_REQUEST_NULL) continue;
    // The last question's send is done: its answer came, so the question got there.
    if (p.question_send != MPI_REQUEST_NULL) STRATA_MPI_CHECK(MPI_Wait(&p.question_send, MPI_STATUS_IGNORE));
    STRATA_MPI_CHECK(MPI_Irecv(p.answer.data(), static_cast<int>(p.answer.size()), MPI_UINT64_T, q, kAnswerTag,
                               comm_, &p.answer_recv));
    STRATA_MPI_CHECK(MPI_Isend(&p.question, 1, MPI_INT, q, kQuestionTag, comm_, &p.question_send));
  }
  std::vector<bool> answered(size_, false);
  answered[rank_] = true;
  const double deadline = now_seconds() + deadline_;
  for (;;) {
    bool all = true;
    for (int q = 0; q < size_; ++q) {
      if (answered[q]) continue;
      int done = 0;
      STRATA_MPI_CHECK(MPI_Test(&peers_[q].answer_recv, &done, MPI_STATUS_IGNORE));
      answered[q] = done;
      all = all && done;
    }
    if (all || now_seconds() >= deadline) break;
    serve();  // the others may be asking at the same time
    sleep_seconds(0.001);
  }
  StallReport r;
  r.rank = rank_;
  r.channel = channels_[channel];
  r.collective = collective;
  r.waited_seconds = waited;
  for (int q = 0; q < size_; ++q) {
    if (!answered[q]) {
      r.not_answering.push_back(q);
    } else if (q != rank_ && peers_[q].answer[2 * channel] < collective) {
      r.behind.emplace_back(q, peers_[q].answer[2 * channel]);
    }
  }
  return r;
}

void StallWatchdog::abort_job(const StallReport& r) {
  mpi_abort("stall: " + r.text() + "; that is over the limit of " + seconds_text(limits_.abort_seconds) +
            " (STRATA_STALL_ABORT_SECONDS): ending the job");
}

void StallWatchdog::shutdown_messages() {
  // Receives are cancelled. Sends (a few bytes each, sent eagerly) are done at once unless the other rank's queue
  // is full: they get until the deadline, then are left to complete on their own.
  auto cancel = [](MPI_Request* r) {
    if (*r == MPI_REQUEST_NULL) return;
    MPI_Cancel(r);
    MPI_Wait(r, MPI_STATUS_IGNORE);
  };
  const double deadline = now_seconds() + deadline_;
  auto release = [deadline](MPI_Request* r) {
    int done = 0;
    while (*r != MPI_REQUEST_NULL && MPI_Test(r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           now_seconds() < deadline)
      sleep_seconds(0.001);
    if (*r != MPI_REQUEST_NULL) MPI_Request_free(r);
  };
  cancel(&question_);
  for (Peer& p : peers_) {
    cancel(&p.answer_recv);
    release(&p.question_send);
    release(&p.answer_send);
  }
}

WatchedAllreduce::WatchedAllreduce(std::unique_ptr<Allreduce> inner, StallWatch watch)
    : Allreduce(inner->comm()), inner_(std::move(inner)), watch_(watch) {}

}  // namespace strata
