#include "strata/comm/shm_group.hpp"

#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>

#include "strata/comm/allreduce_kernels.hpp"
#include "strata/comm/communicator.hpp"

namespace strata {
namespace comm_detail {

// A flag a rank raises to a round number, and the count of threads asleep on it (see wait_all).
struct ShmGroup::Flag {
  std::atomic<uint32_t> round{0};
  std::atomic<uint32_t> sleepers{0};
};

struct ShmGroup::Flags {
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

// How long a wait polls before it sleeps on the flag (a futex). A rank already on its way arrives within
// microseconds, and a sleep costs a wake-up (a system call on the raising rank, the scheduler on this one) and,
// where another process shares the core, may hand that process a whole time slice. Figures: docs/allreduce.md.
// STRATA_ALLREDUCE_SHM_SPIN_US overrides the first, for measurements.
const int64_t kSpinNs = [] {
  const char* env = getenv("STRATA_ALLREDUCE_SHM_SPIN_US");
  return env ? static_cast<int64_t>(atof(env) * 1000) : int64_t(50000);
}();
// A thread that asked for blocking waits shares its core with the computation: it polls only briefly.
constexpr int64_t kBesideComputeSpinNs = 2000;

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

constexpr size_t kNameBytes = 64;
constexpr size_t kPage = 4096;

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

ShmGroup::ShmGroup(MPI_Comm comm, size_t slot_bytes) {
  STRATA_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  STRATA_MPI_CHECK(MPI_Comm_size(comm, &size_));
  // With more ranks than cores the rank being waited for may need this very core: sleep at once.
  spin_ns_ = size_ <= sysconf(_SC_NPROCESSORS_ONLN) ? kSpinNs : 0;
  const size_t stride = (sizeof(Flags) + slot_bytes + kPage - 1) / kPage * kPage;
  if (!map_segment(comm, rank_, stride * size_, &segment_)) return;
  segment_bytes_ = stride * size_;
  for (int q = 0; q < size_; ++q) {
    char* base = static_cast<char*>(segment_) + q * stride;
    flags_.push_back(reinterpret_cast<Flags*>(base));
    slots_.push_back(base + sizeof(Flags));
  }
  new (flags_[rank_]) Flags;
  memset(slots_[rank_], 0, slot_bytes);
  STRATA_MPI_CHECK(MPI_Barrier(comm));
}

ShmGroup::~ShmGroup() {
  if (segment_) munmap(segment_, segment_bytes_);
}

ShmGroup::Flag& ShmGroup::flag(int q, Phase phase) const {
  return phase == kArrived ? flags_[q]->arrived : flags_[q]->reduced;
}

void ShmGroup::raise(Phase phase, uint64_t round) {
  Flag& f = flag(rank_, phase);
  // Sequentially consistent, both here and in wait_all: either this load sees a sleeper's count, or that
  // sleeper's own re-check (or the kernel's, in futex_wait) sees the new round. No wake is lost.
  f.round.store(static_cast<uint32_t>(round), std::memory_order_seq_cst);
  if (f.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&f.round);
}

void ShmGroup::wait_ranks(Phase phase, uint64_t round64, int first, int last) const {
  const int sleep_us = thread_poll_sleep_us();
  const timespec pause{0, 1000L * sleep_us};
  const uint32_t round = static_cast<uint32_t>(round64);
  // One spell of polling for the whole wait, however many flags it takes.
  const int64_t spin_ns = thread_blocking_waits() ? std::min(spin_ns_, kBesideComputeSpinNs) : spin_ns_;
  const int64_t spin_end = spin_ns > 0 ? now_ns() + spin_ns : 0;
  bool spinning = spin_ns > 0;
  for (int q = first; q < last; ++q) {
    Flag& f = flag(q, phase);
    for (int polls = 1; behind(f.round.load(std::memory_order_acquire), round); ++polls) {
      if (spinning && polls % 16 == 0) spinning = now_ns() < spin_end;
      if (spinning) {
        _mm_pause();
      } else if (sleep_us > 0) {
        nanosleep(&pause, nullptr);  // comm_param.poll_sleep_us: sleeps of a set length
      } else {
        // Asleep in the kernel until rank q raises its flag: the core goes to whatever else wants it (the
        // computation beside a communication thread, another process) and comes back with the wake-up.
        f.sleepers.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t seen = f.round.load(std::memory_order_seq_cst);
        if (behind(seen, round)) futex_wait(&f.round, seen);
        f.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
    }
  }
}

}  // namespace comm_detail
}  // namespace strata
