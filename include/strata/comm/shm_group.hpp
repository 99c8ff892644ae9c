// The ranks of one machine with one shared-memory segment mapped by all of them: a slot of bytes per rank
// that every rank can read, and per rank two flags ("arrived", "reduced") that its owner raises to a round
// number and the others wait on. The base of `shm` and of the node part of `hier`
// (shm_allreduce.hpp, hier_allreduce.hpp); users of the library need only allreduce.hpp.
//
// A rank waiting on a flag polls it for a bounded time (none when ranks outnumber the cores, briefly on a thread
// that asked for blocking waits: the data-parallel engine's communication threads, which share a core with the
// computation), then sleeps on it as a futex until its owner raises it. It never yields in a loop: beside a busy
// process every yield hands that process a time slice.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata {
namespace comm_detail {

class ShmGroup {
 public:
  enum Phase { kArrived, kReduced };

  // Collective over comm, whose ranks must share one machine: rank 0 creates the segment (slot_bytes per
  // rank, rounded up to whole pages, plus the flags) and the others map it. ok() is false on every rank if
  // any rank could not map it; the name is unlinked as soon as all have it, so nothing is left in /dev/shm.
  // Each rank faults its own slot in here, so no timed call pays for page faults.
  ShmGroup(MPI_Comm comm, size_t slot_bytes);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  bool ok() const { return segment_ != nullptr; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  char* slot(int q) const { return slots_[q]; }

  // Raises this rank's flag to `round` (waking ranks asleep on it).
  void raise(Phase phase, uint64_t round);
  // Waits until every rank's flag has reached `round`.
  void wait_all(Phase phase, uint64_t round) const { wait_ranks(phase, round, 0, size_); }
  // Waits until the flags of ranks first..last-1 have reached `round`.
  void wait_ranks(Phase phase, uint64_t round, int first, int last) const;

 private:
  struct Flag;
  struct Flags;  // one rank's flags, on cache lines of their own
  Flag& flag(int q, Phase phase) const;

  int rank_ = 0;
  int size_ = 1;
  int64_t spin_ns_;  // how long a wait polls before it sleeps
  void* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  std::vector<Flags*> flags_;  // by rank
  std::vector<char*> slots_;   // by rank
};

}  // namespace comm_detail
}  // namespace strata
