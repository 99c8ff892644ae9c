// Shared memory: the ranks of one machine reduce through a segment every one of them has mapped, with
// plain loads and stores instead of MPI messages.
//
// Why: between processes on one machine Open MPI's vader transport copies a large message with one
// process_vm_readv (CMA) per message. That kernel path pins the sender's pages on every call and ran at
// about 12 GB/s here, against 45-90 GB/s for a memcpy of the same 256 KiB-4 MiB in cache, so every
// point-to-point algorithm (Strata's and Open MPI's own) spends most of a 1 MiB allreduce in the kernel.
//
// The message goes through in chunks. Each rank has a slot of two chunk-sized halves (chunk k uses half
// k % 2), and each chunk is cut into N blocks; rank r owns block r. For one chunk:
//   1. every rank copies the blocks it does not own into its slot and raises its "arrived" flag;
//   2. once all have arrived, rank r sums block r: its own buffer's block plus every other rank's copy,
//      in rank order, into its buffer, and copies the finished block into its slot; "reduced" flag;
//   3. once all have reduced, rank r copies every other finished block from its owner's slot.
// Per rank that is (N-1)/N M copied in, M summed, (N-1)/N M copied out: the traffic of the ring, with
// two flag waits per chunk instead of 2 (N-1) message rounds. A chunk of at most 16 KiB instead goes in
// whole and every rank sums all N copies itself after the first wait: one wait, and the sums are cheap. Half k % 2 of a slot is written again only
// in chunk k + 2, after every rank has arrived at chunk k + 1 and so finished reading chunk k.
//
// Every block is summed in one place and copied, so all ranks end bit-identical. When the ranks of the
// communicator do not all share one machine the segment cannot exist, and the class runs ring_seg
// instead (same results, by messages).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/comm/allreduce.hpp"

namespace strata {

class ShmAllreduce : public Allreduce {
 public:
  // Collective over comm (every rank constructs it at the same point): agrees on and maps the segment.
  // chunk_bytes: the per-rank share of the buffer one chunk covers (each slot holds two).
  explicit ShmAllreduce(MPI_Comm comm, size_t chunk_bytes = kDefaultChunkBytes);
  ~ShmAllreduce() override;
  std::string name() const override { return "shm"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;

  // Measured at 2 ranks (docs/benchmarks.md): 4, 16 and 64 MiB messages took 1446 / 7956 / 34003 us
  // with 1 MiB chunks, 761 / 4347 / 19437 with 4 MiB and 542 / 2738 / 11576 with 16 MiB. Each chunk
  // costs more than its two flag waits: when the copied blocks fit the writer's L2 cache the readers
  // take them line by line from that cache, and larger chunks have left it for the shared L3 by then.
  // The price is 2 x 16 MiB of shared memory per rank and instance.
  static constexpr size_t kDefaultChunkBytes = 16 << 20;

 private:
  struct Flags;  // one rank's flags, on cache lines of their own
  void wait_all(std::atomic<uint64_t> Flags::*flag, uint64_t round) const;

  size_t chunk_bytes_;
  int spin_polls_;  // polls before each yield
  void* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  std::vector<Flags*> flags_;     // by rank
  std::vector<char*> slots_;      // by rank: two halves of chunk_bytes_
  uint64_t round_ = 0;            // chunks done so far, the same on every rank
  std::unique_ptr<Allreduce> fallback_;  // when the ranks do not share a machine
};

}  // namespace strata
