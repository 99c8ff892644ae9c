#include "strata/comm/shm_allreduce.hpp"

#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"

namespace strata {

using comm_detail::at;
using comm_detail::block_begin;

// A flag a rank raises to a round number, and the count of threads asleep on it (see wait_all).
struct ShmAllreduce::Flag {
  std::atomic<uint32_t> round{0};
  std::atomic<uint32_t> sleepers{0};
};

struct ShmAllreduce::Flags {
  // Separate lines: the owner writes one flag while the others poll the other.
  alignas(64) Flag arrived;
  alignas(64) Flag reduced;
};

namespace {
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "a futex is a plain 32-bit word");

// Round numbers wrap at 2^32: a flag is behind while it is less than `round` modulo 2^32.
bool behind(uint32_t flag, uint32_t round) { return static_cast<int32_t>(flag - round) < 0; }

// The segment is shared between processes, so these are the shared (not process-private) futex calls.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Polls before giving the core away: a rank already on its way arrives within a microsecond or two, and
// a rank that is not running only gets the core if this one yields it.
constexpr int kSpinPolls = 64;
constexpr size_t kNameBytes = 64;

// Up to this many bytes a chunk is summed whole by every rank after one flag wait: the redundant sums
// cost less than the second wait, which needs every rank to have been scheduled once more.
const size_t kWholeSumBytes = [] {
  const char* env = getenv("STRATA_ALLREDUCE_SHM_WHOLE_SUM_BYTES");
  return env ? static_cast<size_t>(atoll(env)) : size_t(16384);
}();

size_t chunk_bytes_setting(size_t requested, bool oversubscribed) {
  const char* env = getenv("STRATA_ALLREDUCE_SHM_CHUNK_BYTES");
  if (requested == 0) {
    requested = oversubscribed ? ShmAllreduce::kSharedCoreChunkBytes : ShmAllreduce::kDedicatedCoreChunkBytes;
  }
  size_t bytes = env ? static_cast<size_t>(atoll(env)) : requested;
  // Whole cache lines, and room for at least one double.
  return std::max<size_t>(64, bytes / 64 * 64);
}

// Rank 0 creates the segment and hands its name round; an empty name means it could not.
bool map_segment(MPI_Comm comm, int rank, size_t bytes, void** mapped) {
  static std::atomic<int> serial{0};
  char name[kNameBytes] = {0};
  int fd = -1;
  if (rank == 0) {
    snprintf(name, sizeof(name), "/strata-allreduce-%d-%d", static_cast<int>(getpid()), serial++);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      if (fd >= 0) close(fd), shm_unlink(name);
      fd = -1;
      name[0] = 0;
    }
  }
  STRATA_MPI_CHECK(MPI_Bcast(name, kNameBytes, MPI_CHAR, 0, comm));
  void* p = MAP_FAILED;
  if (name[0] != 0) {
    if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
  }
  int ok = p != MAP_FAILED, all_ok = 0;
  STRATA_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
  // Once every rank has it mapped (or given up) the name is not needed: unlinked now, nothing is left
  // behind in /dev/shm however the job ends.
  if (rank == 0 && name[0] != 0) shm_unlink(name);
  if (!all_ok) {
    if (p != MAP_FAILED) munmap(p, bytes);
    return false;
  }
  *mapped = p;
  return true;
}
}  // namespace

ShmAllreduce::ShmAllreduce(MPI_Comm comm, size_t chunk_bytes)
    : Allreduce(comm),
      chunk_bytes_(chunk_bytes_setting(chunk_bytes, size_ > sysconf(_SC_NPROCESSORS_ONLN))),
      // With more ranks than cores the rank being waited for may need this very core: yield at once.
      spin_polls_(size_ <= sysconf(_SC_NPROCESSORS_ONLN) ? kSpinPolls : 0) {
  if (size_ == 1) return;
  MPI_Comm node;
  int node_size = 0;
  STRATA_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  STRATA_MPI_CHECK(MPI_Comm_size(node, &node_size));
  STRATA_MPI_CHECK(MPI_Comm_free(&node));
  // Every rank sees the same node sizes only if they all share one machine; otherwise all take the
  // fallback together (the minimum tells each rank whether any was left out).
  int local = node_size == size_, all = 0;
  STRATA_MPI_CHECK(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, comm));
  const size_t stride = (sizeof(Flags) + 2 * chunk_bytes_ + 4095) / 4096 * 4096;
  if (!all || !map_segment(comm, rank_, stride * size_, &segment_)) {
    fallback_ = make_allreduce_algorithm("ring_seg", comm);
    return;
  }
  segment_bytes_ = stride * size_;
  for (int q = 0; q < size_; ++q) {
    char* base = static_cast<char*>(segment_) + q * stride;
    flags_.push_back(reinterpret_cast<Flags*>(base));
    slots_.push_back(base + sizeof(Flags));
  }
  // Each rank sets up its own flags and faults its own slot in, so no timed call pays for page faults.
  new (flags_[rank_]) Flags;
  memset(slots_[rank_], 0, 2 * chunk_bytes_);
  STRATA_MPI_CHECK(MPI_Barrier(comm));
}

ShmAllreduce::~ShmAllreduce() {
  if (segment_) munmap(segment_, segment_bytes_);
}

void ShmAllreduce::raise(Flag Flags::*flag, uint64_t round) {
  Flag& f = flags_[rank_]->*flag;
  // Sequentially consistent, both here and in wait_all: either this load sees a sleeper's count, or that
  // sleeper's own re-check (or the kernel's, in futex_wait) sees the new round. No wake is lost.
  f.round.store(static_cast<uint32_t>(round), std::memory_order_seq_cst);
  if (f.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&f.round);
}

void ShmAllreduce::wait_all(Flag Flags::*flag, uint64_t round64) const {
  const int sleep_us = comm_detail::thread_poll_sleep_us();
  const bool block = comm_detail::thread_blocking_waits();
  const timespec pause{0, 1000L * sleep_us};
  const uint32_t round = static_cast<uint32_t>(round64);
  // A thread that may block spins a little even when ranks outnumber cores: the wait is often over at once.
  const int spins = block ? std::max(spin_polls_, kSpinPolls) : spin_polls_;
  for (int q = 0; q < size_; ++q) {
    Flag& f = flags_[q]->*flag;
    for (int polls = 0; behind(f.round.load(std::memory_order_acquire), round); ++polls) {
      if (polls < spins) {
        _mm_pause();
      } else if (sleep_us > 0) {
        nanosleep(&pause, nullptr);
      } else if (block) {
        // Asleep in the kernel until rank q raises its flag: a communication thread beside the computation
        // leaves the core to it instead of taking turns with it in sched_yield.
        f.sleepers.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t seen = f.round.load(std::memory_order_seq_cst);
        if (behind(seen, round)) futex_wait(&f.round, seen);
        f.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      } else {
        sched_yield();
      }
    }
  }
}

void ShmAllreduce::run(void* buf, size_t count, DataType t) {
  if (count == 0 || size_ == 1) return;
  if (fallback_) {
    fallback_->run(buf, count, t);
    return;
  }
  const size_t es = size_of(t);
  const size_t chunk = chunk_bytes_ / es;
  const int n = size_;
  for (size_t b = 0; b < count; b += chunk) {
    const size_t len = std::min(chunk, count - b);
    const uint64_t round = ++round_;
    const size_t half = (round % 2) * chunk_bytes_;
    char* data = at(buf, b, t);
    char* mine = slots_[rank_] + half;
    if (len * es <= kWholeSumBytes) {
      // Small: every rank copies all of it in and, after one flag wait instead of two, sums all N copies
      // itself. Every rank adds the same operands in the same (rank) order, so all end bit-identical.
      memcpy(mine, data, len * es);
      raise(&Flags::arrived, round);
      wait_all(&Flags::arrived, round);
      memcpy(data, slots_[0] + half, len * es);
      for (int q = 1; q < n; ++q) comm_detail::sum_into(data, slots_[q] + half, len, t);
      continue;
    }
    auto begin = [&](int q) { return block_begin(q, n, len) * es; };
    auto bytes = [&](int q) { return begin(q + 1) - begin(q); };
    for (int q = 0; q < n; ++q)
      if (q != rank_) memcpy(mine + begin(q), data + begin(q), bytes(q));
    raise(&Flags::arrived, round);
    wait_all(&Flags::arrived, round);
    const size_t own = begin(rank_), own_elems = bytes(rank_) / es;
    for (int q = 0; q < n; ++q)
      if (q != rank_) comm_detail::sum_into(data + own, slots_[q] + half + own, own_elems, t);
    memcpy(mine + own, data + own, bytes(rank_));
    raise(&Flags::reduced, round);
    wait_all(&Flags::reduced, round);
    for (int q = 0; q < n; ++q)
      if (q != rank_) memcpy(data + begin(q), slots_[q] + half + begin(q), bytes(q));
  }
}

}  // namespace strata
