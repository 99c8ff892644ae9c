#include "strata/engine/signal_agreement.hpp"

#include <glog/logging.h>

#include "strata/common.hpp"

namespace strata {

SignalAction SignalAgreement::Agree(SignalAction local, int iter) {
  if (ranks_ == 1) return local;
  if (local == SignalAction::kStop || local_ == SignalAction::kNone) local_ = local;
  const int from = iter - kLag;
  std::unique_lock<std::mutex> lock(mutex_);
  if (first_iter_ < 0 || from < first_iter_) return SignalAction::kNone;
  cv_.wait(lock, [&] { return agreed_.count(from) > 0; });
  const SignalAction agreed = agreed_[from];
  agreed_.erase(agreed_.begin(), agreed_.upper_bound(from));
  if (agreed != SignalAction::kNone && Strata::root_solver()) {
    LOG(INFO) << "All ranks " << (agreed == SignalAction::kStop ? "stop" : "snapshot") << " at iteration " << iter
              << " (requested at iteration " << from << ")";
  }
  return agreed;
}

bool SignalAgreement::TakeMessage(int iter, SignalAction* request) {
  if (ranks_ == 1) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_;
    if (first_iter_ < 0) first_iter_ = iter;
  }
  *request = local_;
  local_ = SignalAction::kNone;
  return true;
}

void SignalAgreement::Reduce(int iter, SignalAction request, Allreduce& allreduce) {
  // How many ranks asked to stop and to snapshot: sums of small integers, exact in float.
  float requests[2] = {request == SignalAction::kStop ? 1.f : 0.f, request == SignalAction::kSnapshot ? 1.f : 0.f};
  allreduce.run(requests, 2);
  const SignalAction agreed = requests[0] > 0   ? SignalAction::kStop
                              : requests[1] > 0 ? SignalAction::kSnapshot
                                                : SignalAction::kNone;
  std::lock_guard<std::mutex> lock(mutex_);
  agreed_[iter] = agreed;
  --pending_;
  cv_.notify_all();
}

void SignalAgreement::ReduceStopQuery(SignalAction request, Allreduce& allreduce) {
  float stops[2] = {request == SignalAction::kStop ? 1.f : 0.f, 0.f};  // the control message's shape
  allreduce.run(stops, 2);
  std::lock_guard<std::mutex> lock(mutex_);
  stop_query_ = stops[0] > 0 ? 1 : 0;
  cv_.notify_all();
}

bool SignalAgreement::WaitForStopQuery() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return stop_query_ >= 0; });
  const bool stop = stop_query_ == 1;
  stop_query_ = -1;
  if (stop && Strata::root_solver()) LOG(INFO) << "All ranks stop between two micro-batches";
  return stop;
}

void SignalAgreement::WaitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return pending_ == 0; });
}

}  // namespace strata
