// SignalAgreement: every rank stops or snapshots at the same iteration, whichever rank the signal reached.
//
// SIGINT (stop) or SIGHUP (snapshot) can reach the ranks at different iterations, and a rank that stops or
// snapshots alone leaves the others waiting in a collective. So each iteration's local request travels as one
// more tiny allreduce (a "control message"), queued on communication thread 0 behind that iteration's
// gradients, and every rank acts on the sum of iteration t at iteration t + 2, when it has long arrived (the
// forward of t + 1 already waited for every update of t). With one rank a request is acted on at once.
// Between the micro-batches of one iteration (iter_size > 1), a stop is agreed at once instead: a "stop query"
// on thread 0, which has nothing else to do then, whose answer the main thread waits for.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "strata/comm/allreduce.hpp"
#include "strata/engine/training_engine.hpp"

namespace strata {

class SignalAgreement {
 public:
  static constexpr int kLag = 2;  // iterations between a request and the action every rank takes

  explicit SignalAgreement(int ranks) : ranks_(ranks) {}

  // Main thread, at the start of iteration `iter`: records this rank's request (a stop outranks a snapshot asked
  // for before the next message leaves) and returns the action all ranks agreed on for iteration iter - kLag.
  SignalAction Agree(SignalAction local, int iter);
  // Main thread, once iteration `iter`'s gradients are queued: whether a control message must follow them (never
  // with one rank), and what it carries. The message must then be reduced by Reduce on every rank.
  bool TakeMessage(int iter, SignalAction* request);
  // A communication thread: sums the ranks' requests of iteration `iter` and records what they agreed.
  void Reduce(int iter, SignalAction request, Allreduce& allreduce);
  // Waits until no control message is queued or in flight (a rank must not leave while one is).
  void WaitIdle();

  // A communication thread: sums the ranks' stop requests of one stop query (kStop or kNone each).
  void ReduceStopQuery(SignalAction request, Allreduce& allreduce);
  // Main thread: waits for the stop query it queued and returns whether any rank asked to stop.
  bool WaitForStopQuery();

 private:
  const int ranks_;
  SignalAction local_ = SignalAction::kNone;  // main thread: the request not yet sent
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int, SignalAction> agreed_;  // by iteration
  int pending_ = 0;                     // messages taken and not yet reduced
  int first_iter_ = -1;                 // the first iteration that sent one (-1: none yet)
  int stop_query_ = -1;                 // the last stop query's answer, 0 or 1, until taken (-1: none)
};

}  // namespace strata
