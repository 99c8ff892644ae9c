// The pieces every allreduce algorithm is built from: a scratch buffer that only grows, the sum kernel,
// the even split of a buffer into blocks, the pairwise exchange (plain or summing, whole or in pipelined
// segments) and the fold of a non-power-of-two rank count. Users of the library need only allreduce.hpp.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/comm/allreduce.hpp"

namespace strata {
namespace comm_detail {

// 64-byte aligned memory kept between calls. Growing touches every new page once, so the page faults
// are paid on the first call of a size and never again.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  void* get(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// How the calling thread waits for its messages. By default (0) it blocks in MPI, which polls: fastest
// when the thread has a core to itself. With a positive value it polls with MPI_Testall and, once a short
// spin has not finished the wait, sleeps that many microseconds between polls: a communication thread
// that shares its core with computation (the data-parallel engine's) then gives the core back while it waits
// for the other ranks, instead of taking turns with the computation in sched_yield. A per-thread setting,
// so the benchmark and other callers keep blocking waits.
void set_thread_poll_sleep_us(int us);
int thread_poll_sleep_us();
// Whether the calling thread shares its core with the computation (the data-parallel engine's communication
// threads): where an algorithm can be woken by the other ranks (`shm`'s flags, through a futex) it then polls only
// a couple of microseconds before it sleeps, instead of the longer spell that suits a thread with a core to itself.
void set_thread_blocking_waits(bool on);
bool thread_blocking_waits();
// MPI_Waitall under the calling thread's wait setting.
void wait_all(int n, MPI_Request* reqs);

// A chunk size in bytes: the environment variable env_name if set, else `requested`; rounded down to whole
// cache lines, and at least one (room for a double). For the algorithms that stage chunks in shared memory.
size_t chunk_bytes_from_env(const char* env_name, size_t requested);

// dst[i] += src[i] for i < n. Written so the compiler vectorises it (AVX2 where the CPU has it: cpu_dispatch.hpp).
void sum_into(void* dst, const void* src, size_t n, DataType t);

// Element i of a buffer of `count` elements split into `blocks` near-equal blocks starts at
// block_begin(i): the first count % blocks blocks get one element more. Every rank computes the same split.
inline size_t block_begin(size_t i, size_t blocks, size_t count) {
  size_t q = count / blocks, r = count % blocks;
  return i * q + (i < r ? i : r);
}

inline char* at(void* buf, size_t elem, DataType t) { return static_cast<char*>(buf) + elem * size_of(t); }
inline const char* at(const void* buf, size_t elem, DataType t) {
  return static_cast<const char*>(buf) + elem * size_of(t);
}

// One rank's side of a pairwise step: send a range to one peer while receiving a range from another
// (often the same). Counts of 0 mean "no message" and the matching peer sees 0 too, so nothing is sent.
//
// With segment_bytes > 0 a message is cut into segments of that size (each its own MPI message); the
// receive of segment k+1 is posted before segment k is summed, so the copy of the next segment overlaps
// the sum of this one, and the summed-from scratch (two segments) stays in cache instead of making a
// full-size round trip through memory. Sender and receiver cut the same count the same way, so a
// send_recv_sum on one side always pairs with a send_recv_sum on the other (the same for send_recv).
class Exchange {
 public:
  Exchange(MPI_Comm comm, size_t segment_bytes);

  // acc[0..recv_count) += what `from` sends; send[0..send_count) goes to `to`.
  void send_recv_sum(const void* send, size_t send_count, int to, void* acc, size_t recv_count, int from,
                     DataType t);
  // buf[0..count) += the peer's buf[0..count), while the peer does the same with ours (the butterfly
  // step). Segment k is summed only once its send has completed, so the peer never reads a sum.
  void swap_sum(void* buf, size_t count, int peer, DataType t);
  // recv[0..recv_count) = what `from` sends; send[0..send_count) goes to `to`.
  void send_recv(const void* send, size_t send_count, int to, void* recv, size_t recv_count, int from,
                 DataType t);

 private:
  size_t segment_elems(DataType t) const;
  void post_sends(const void* send, size_t send_count, int to, DataType t, size_t seg);

  MPI_Comm comm_;
  size_t segment_bytes_;
  ScratchBuffer scratch_;
  std::vector<MPI_Request> send_reqs_;  // kept so a call allocates nothing
};

// Recursive doubling and halving need a power-of-two number of ranks. With N = p + rem ranks (p the
// largest power of two <= N), the first 2*rem ranks pair up: the even one of each pair hands its whole
// buffer to the odd one and sits out ("extra"), the odd one sums (x_odd += x_even) and takes part as
// virtual rank rank/2; ranks >= 2*rem take part as virtual rank rank - rem. At the end each extra rank
// receives a copy of the result from its partner. Pairing neighbours spreads the fold over rem ranks
// instead of piling it on one.
struct PowerOfTwoFold {
  PowerOfTwoFold(int rank, int size);

  int p = 1;            // ranks taking part after the fold
  int rem = 0;          // ranks sitting out
  bool extra = false;   // this rank sits out
  int partner = -1;     // fold partner (both sides of a folded pair), -1 if none
  int vrank = -1;       // virtual rank among the p, -1 when extra

  int real_rank(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  void fold_in(Exchange& ex, void* buf, size_t count, DataType t) const;
  void fold_out(Exchange& ex, void* buf, size_t count, DataType t) const;
};

}  // namespace comm_detail
}  // namespace strata
