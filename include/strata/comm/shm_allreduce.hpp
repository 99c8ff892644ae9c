// Shared memory: the ranks of one machine reduce through a segment every one of them has mapped, with
// plain loads and stores instead of MPI messages.
//
// Why: between processes on one machine Open MPI's vader transport copies a large message with one
// process_vm_readv (CMA) per message. That kernel path pins the sender's pages on every call and runs several
// times slower than a memcpy in cache, so every point-to-point algorithm (Strata's and Open MPI's own) spends
// most of a 1 MiB allreduce in the kernel (docs/allreduce.md, "shm", has the figures).
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
// Waits are ShmGroup's (shm_group.hpp): a bounded spell of polling, then a futex sleep on the flag.
//
// Every block is summed in one place and copied, so all ranks end bit-identical. When the ranks of the
// communicator do not all share one machine the segment cannot exist, and the class runs hier instead
// (hier_allreduce.hpp: shared memory inside each machine, the network between them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "strata/comm/allreduce.hpp"

namespace strata {

namespace comm_detail {
class ShmGroup;
}

class ShmAllreduce : public Allreduce {
 public:
  // Collective over comm (every rank constructs it at the same point): agrees on and maps the segment.
  // chunk_bytes: the share of the buffer one chunk covers (each slot holds two); 0 picks it by placement
  // (below); the environment variable STRATA_ALLREDUCE_SHM_CHUNK_BYTES overrides both.
  explicit ShmAllreduce(MPI_Comm comm, size_t chunk_bytes = 0);
  ~ShmAllreduce() override;
  std::string name() const override { return "shm"; }
  void run(void* buf, size_t count, DataType type) override;
  using Allreduce::run;
  std::string explain(size_t bytes) const override;

  // The chunk size is a trade between the flag waits (two per chunk) and the cache (slots of small chunks
  // stay in the shared L3 while the message streams past). When every rank has a core of its own a flag
  // wait is cheap and small chunks win; when ranks outnumber the cores every wait is a trip through the
  // scheduler and large chunks win, as on a loaded machine (docs/allreduce.md, "shm", has the measurements).
  // Shared memory: two chunks per rank and instance.
  static constexpr size_t kDedicatedCoreChunkBytes = 2 << 20;
  static constexpr size_t kSharedCoreChunkBytes = 16 << 20;

 private:
  size_t chunk_bytes_ = 0;
  std::unique_ptr<comm_detail::ShmGroup> group_;  // two chunk-sized halves per rank
  uint64_t round_ = 0;                            // chunks done so far, the same on every rank
  std::unique_ptr<Allreduce> fallback_;           // when the ranks do not share a machine
};

}  // namespace strata
