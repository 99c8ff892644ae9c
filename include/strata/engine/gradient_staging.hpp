// How the data-parallel engine moves gradients that live on the GPU (the seed paper's section 4, steps 1 to 4;
// docs/gpu.md).
//
//   HOST (comm_param.gpu_path, the default)
//     main thread, backward has enqueued layer L -> an event on the compute stream; the copy-out stream waits for it
//                                                 and copies each chunk of L's gradients into the bucket's pinned
//                                                 host buffer, one event per chunk
//     communication thread                      -> sleeps on its chunk's event, allreduces the host chunk exactly
//                                                 as CPU training does, copies the sum back on the copy-in stream
//                                                 and waits for that copy
//   NCCL
//     main thread                               -> the communication stream waits for the same compute event and
//                                                 sums each chunk in device memory with ncclAllReduce, one event
//                                                 per chunk
//     communication thread                      -> sleeps on its chunk's event
//
// Either way Reduce returns only once the chunk's sum over the ranks is back in the gradient on the device (the
// optimizer scales it, Optimizer::gradient_scale), so the engine's bookkeeping is the CPU's: when the last chunk of a
// layer is reduced, that thread enqueues the layer's update, and the next forward of the layer, enqueued after it on the same stream, waits for it. The
// ordering argument is in docs/gpu.md. Communication threads never touch SyncedMemory here: the main thread
// takes the gradients' device pointers when it stages a bucket.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/comm/allreduce.hpp"
#include "strata/engine/bucket_plan.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

// Plain bookkeeping of the staged path: each bucket's gradients lie back to back in its staging buffer, in bucket
// order; a chunk of the bucket covers a range of that buffer, made of pieces of one or more gradients.
class StagingMap {
 public:
  // A piece of a chunk: elements [grad_offset, grad_offset + count) of the bucket's gradient number `slot` sit at
  // staging_offset in the bucket's buffer.
  struct Piece {
    int slot = 0;
    size_t grad_offset = 0;
    size_t staging_offset = 0;
    size_t count = 0;
  };

  // sizes[b]: the element counts of bucket b's gradients (none empty), in bucket order.
  StagingMap(const std::vector<std::vector<size_t>>& sizes, size_t chunk_elems);

  int num_buckets() const { return static_cast<int>(elements_.size()); }
  size_t elements(int bucket) const { return elements_[bucket]; }
  const std::vector<ElementRange>& chunks(int bucket) const { return chunks_[bucket]; }
  // The chunk of `bucket` that starts at `offset`; a task's (offset, count) must be one of chunks(bucket).
  int chunk_at(int bucket, size_t offset, size_t count) const;
  const std::vector<Piece>& pieces(int bucket, int chunk) const { return pieces_[bucket][chunk]; }
  // Every chunk of every bucket numbered 0..total_chunks()-1 (one event each).
  int total_chunks() const { return total_chunks_; }
  int chunk_id(int bucket, int chunk) const { return first_chunk_[bucket] + chunk; }

 private:
  std::vector<size_t> elements_;
  std::vector<std::vector<ElementRange>> chunks_;
  std::vector<std::vector<std::vector<Piece>>> pieces_;
  std::vector<int> first_chunk_;
  int total_chunks_ = 0;
};

template <typename Dtype>
class GradientStaging {
 public:
  virtual ~GradientStaging() = default;
  // Main thread, when backward has enqueued the last kernel that writes the bucket's gradients: starts moving and
  // (NCCL) reducing its chunks, behind that work.
  virtual void Stage(int bucket) = 0;
  // A communication thread, for a chunk of a staged bucket: returns when the chunk's values, summed over the
  // ranks (`allreduce`'s communicator), are in the gradients on the device.
  virtual void Reduce(int bucket, size_t offset, size_t count, Allreduce& allreduce) = 0;
  // For the log: the path and what it holds.
  virtual std::string describe() const = 0;
};

// What the data-parallel engine hands over: each bucket's gradients (learnable blobs whose diff is reduced, in the
// BucketPlan's buckets), the chunk size in elements, the path, and the communicator of all ranks (NCCL's unique id
// travels on it).
template <typename Dtype>
struct StagingSetup {
  std::vector<std::vector<Blob<Dtype>*>> buckets;
  size_t chunk_elems = 0;
  CommParameter::GpuPath path = CommParameter::HOST;
  MPI_Comm world = MPI_COMM_NULL;
  // Tests: in CPU training, run the HOST path with plain copies in place of the device copies.
  bool stage_in_cpu_mode = false;
};

// The staging for the current mode: none in CPU training (gradients are reduced where they are), HOST or NCCL in
// GPU training. Throws an Error for NCCL in CPU training, in a build without NCCL, or with ranks sharing a GPU.
// Collective over setup.world for NCCL.
template <typename Dtype>
std::unique_ptr<GradientStaging<Dtype>> MakeGradientStaging(const StagingSetup<Dtype>& setup);

}  // namespace strata
