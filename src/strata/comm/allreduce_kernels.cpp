#include "strata/comm/allreduce_kernels.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <time.h>

#include "strata/comm/communicator.hpp"
#include "strata/cpu_dispatch.hpp"

namespace strata {
namespace comm_detail {

namespace {
// MPI counts are int; no single message carries more elements than this.
constexpr size_t kMaxMessageElems = size_t(1) << 28;
constexpr int kTag = 4242;

template <typename T>
STRATA_HOT_KERNEL void sum_into_typed(T* __restrict dst, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}
}  // namespace

namespace {
thread_local int t_poll_sleep_us = 0;
thread_local bool t_blocking_waits = false;
// Polls before the first sleep: a message already on its way lands within microseconds, and a sleep
// costs at least the timer's granularity (tens of microseconds).
constexpr int kSpinPolls = 64;
}  // namespace

void set_thread_poll_sleep_us(int us) { t_poll_sleep_us = us > 0 ? us : 0; }
int thread_poll_sleep_us() { return t_poll_sleep_us; }
void set_thread_blocking_waits(bool on) { t_blocking_waits = on; }
bool thread_blocking_waits() { return t_blocking_waits; }

void wait_all(int n, MPI_Request* reqs) {
  if (n <= 0) return;
  if (t_poll_sleep_us == 0) {
    STRATA_MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    return;
  }
  const timespec pause{0, 1000L * t_poll_sleep_us};
  for (int polls = 0;; ++polls) {
    int done = 0;
    STRATA_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (polls >= kSpinPolls) nanosleep(&pause, nullptr);
  }
}

ScratchBuffer::~ScratchBuffer() { free(data_); }

void* ScratchBuffer::get(size_t bytes) {
  if (bytes <= bytes_) return data_;
  free(data_);
  data_ = nullptr;
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  if (posix_memalign(&data_, 64, rounded) != 0) throw std::bad_alloc();
  memset(data_, 0, rounded);  // fault the pages in now, not inside a timed call
  bytes_ = rounded;
  return data_;
}

size_t chunk_bytes_from_env(const char* env_name, size_t requested) {
  const char* env = getenv(env_name);
  const size_t bytes = env ? static_cast<size_t>(atoll(env)) : requested;
  return std::max<size_t>(64, bytes / 64 * 64);
}

void sum_into(void* dst, const void* src, size_t n, DataType t) {
  if (t == DataType::kFloat)
    sum_into_typed(static_cast<float*>(dst), static_cast<const float*>(src), n);
  else
    sum_into_typed(static_cast<double*>(dst), static_cast<const double*>(src), n);
}

Exchange::Exchange(MPI_Comm comm, size_t segment_bytes) : comm_(comm), segment_bytes_(segment_bytes) {}

size_t Exchange::segment_elems(DataType t) const {
  if (segment_bytes_ == 0) return kMaxMessageElems;
  return std::max<size_t>(1, std::min(kMaxMessageElems, segment_bytes_ / size_of(t)));
}

void Exchange::post_sends(const void* send, size_t send_count, int to, DataType t, size_t seg) {
  size_t n = (send_count + seg - 1) / seg;
  send_reqs_.resize(n);
  for (size_t k = 0; k < n; ++k) {
    size_t b = k * seg, e = std::min(send_count, b + seg);
    STRATA_MPI_CHECK(MPI_Isend(at(send, b, t), static_cast<int>(e - b), mpi_type_of(t), to, kTag, comm_,
                               &send_reqs_[k]));
  }
}

void Exchange::send_recv_sum(const void* send, size_t send_count, int to, void* acc, size_t recv_count,
                             int from, DataType t) {
  const size_t seg = segment_elems(t);
  const size_t es = size_of(t);
  const size_t nrecv = (recv_count + seg - 1) / seg;
  // Two slots: segment k+1 arrives in one while segment k is summed from the other.
  const size_t slot_elems = std::min(seg, recv_count);
  char* slots[2] = {nullptr, nullptr};
  if (nrecv > 0) {
    slots[0] = static_cast<char*>(scratch_.get((nrecv > 1 ? 2 : 1) * slot_elems * es));
    slots[1] = slots[0] + slot_elems * es;
  }
  MPI_Request recv_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  auto post_recv = [&](size_t k) {
    size_t b = k * seg, e = std::min(recv_count, b + seg);
    STRATA_MPI_CHECK(MPI_Irecv(slots[k % 2], static_cast<int>(e - b), mpi_type_of(t), from, kTag, comm_,
                               &recv_req[k % 2]));
  };
  // Receives first, so the partner's data can land as soon as it is sent.
  if (nrecv > 0) post_recv(0);
  if (nrecv > 1) post_recv(1);
  post_sends(send, send_count, to, t, seg);
  for (size_t k = 0; k < nrecv; ++k) {
    wait_all(1, &recv_req[k % 2]);
    size_t b = k * seg, e = std::min(recv_count, b + seg);
    sum_into(at(acc, b, t), slots[k % 2], e - b, t);
    if (k + 2 < nrecv) post_recv(k + 2);
  }
  wait_all(static_cast<int>(send_reqs_.size()), send_reqs_.data());
}

void Exchange::swap_sum(void* buf, size_t count, int peer, DataType t) {
  if (count == 0) return;
  const size_t seg = segment_elems(t);
  const size_t es = size_of(t);
  const size_t n = (count + seg - 1) / seg;
  const size_t slot_elems = std::min(seg, count);
  char* slots[2];
  slots[0] = static_cast<char*>(scratch_.get(2 * slot_elems * es));
  slots[1] = slots[0] + slot_elems * es;
  MPI_Request reqs[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  auto post = [&](size_t k) {
    size_t b = k * seg, e = std::min(count, b + seg);
    STRATA_MPI_CHECK(MPI_Irecv(slots[k % 2], static_cast<int>(e - b), mpi_type_of(t), peer, kTag, comm_,
                               &reqs[2 * (k % 2)]));
    STRATA_MPI_CHECK(MPI_Isend(at(buf, b, t), static_cast<int>(e - b), mpi_type_of(t), peer, kTag, comm_,
                               &reqs[2 * (k % 2) + 1]));
  };
  post(0);
  if (n > 1) post(1);
  for (size_t k = 0; k < n; ++k) {
    wait_all(2, &reqs[2 * (k % 2)]);
    size_t b = k * seg, e = std::min(count, b + seg);
    sum_into(at(buf, b, t), slots[k % 2], e - b, t);
    if (k + 2 < n) post(k + 2);
  }
}

void Exchange::send_recv(const void* send, size_t send_count, int to, void* recv, size_t recv_count, int from,
                         DataType t) {
  // Copies gain nothing from small segments (there is no sum to keep in cache), so whole messages.
  if (send_count <= kMaxMessageElems && recv_count <= kMaxMessageElems) {
    // Non-blocking pairs rather than MPI_Sendrecv, so the wait follows the thread's wait setting.
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (recv_count > 0) {
      STRATA_MPI_CHECK(
          MPI_Irecv(recv, static_cast<int>(recv_count), mpi_type_of(t), from, kTag, comm_, &reqs[0]));
    }
    if (send_count > 0) {
      STRATA_MPI_CHECK(MPI_Isend(send, static_cast<int>(send_count), mpi_type_of(t), to, kTag, comm_, &reqs[1]));
    }
    wait_all(2, reqs);
    return;
  }
  const size_t seg = kMaxMessageElems;
  post_sends(send, send_count, to, t, seg);
  for (size_t b = 0; b < recv_count; b += seg) {
    size_t e = std::min(recv_count, b + seg);
    MPI_Request req;
    STRATA_MPI_CHECK(MPI_Irecv(at(recv, b, t), static_cast<int>(e - b), mpi_type_of(t), from, kTag, comm_, &req));
    wait_all(1, &req);
  }
  wait_all(static_cast<int>(send_reqs_.size()), send_reqs_.data());
}

PowerOfTwoFold::PowerOfTwoFold(int rank, int size) {
  while (p * 2 <= size) p *= 2;
  rem = size - p;
  if (rank < 2 * rem) {
    extra = (rank % 2 == 0);
    partner = extra ? rank + 1 : rank - 1;
    vrank = extra ? -1 : rank / 2;
  } else {
    vrank = rank - rem;
  }
}

void PowerOfTwoFold::fold_in(Exchange& ex, void* buf, size_t count, DataType t) const {
  if (partner < 0) return;
  if (extra)
    ex.send_recv_sum(buf, count, partner, nullptr, 0, MPI_PROC_NULL, t);
  else
    ex.send_recv_sum(nullptr, 0, MPI_PROC_NULL, buf, count, partner, t);
}

void PowerOfTwoFold::fold_out(Exchange& ex, void* buf, size_t count, DataType t) const {
  if (partner < 0) return;
  if (extra)
    ex.send_recv(nullptr, 0, MPI_PROC_NULL, buf, count, partner, t);
  else
    ex.send_recv(buf, count, partner, nullptr, 0, MPI_PROC_NULL, t);
}

}  // namespace comm_detail
}  // namespace strata
