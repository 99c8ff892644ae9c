#include "strata/engine/gradient_staging.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "strata/comm/communicator.hpp"
#include "strata/common.hpp"
#include "strata/math_functions.hpp"
#include "strata/memory_tracker.hpp"
#ifdef STRATA_USE_CUDA
#include "strata/cuda.hpp"
#include "strata/cuda_libraries.hpp"
#endif
#ifdef STRATA_HAVE_NCCL
#include <nccl.h>
#endif

namespace strata {

StagingMap::StagingMap(const std::vector<std::vector<size_t>>& sizes, size_t chunk_elems) {
  for (const auto& grads : sizes) {
    CHECK(!grads.empty()) << "an empty bucket";
    size_t total = 0;
    for (size_t n : grads) {
      CHECK_GT(n, 0u) << "an empty gradient in a bucket";
      total += n;
    }
    std::vector<ElementRange> chunks = CutBucket(total, grads.size() > 1, chunk_elems);
    std::vector<std::vector<Piece>> pieces;
    for (const ElementRange& c : chunks) {
      std::vector<Piece> cut;
      size_t begin = 0;  // where gradient `slot` starts in the staging buffer
      for (size_t slot = 0; slot < grads.size(); ++slot) {
        const size_t end = begin + grads[slot];
        const size_t lo = std::max(begin, c.offset), hi = std::min(end, c.offset + c.count);
        if (lo < hi) cut.push_back({static_cast<int>(slot), lo - begin, lo, hi - lo});
        begin = end;
      }
      pieces.push_back(std::move(cut));
    }
    first_chunk_.push_back(total_chunks_);
    total_chunks_ += static_cast<int>(chunks.size());
    elements_.push_back(total);
    chunks_.push_back(std::move(chunks));
    pieces_.push_back(std::move(pieces));
  }
}

int StagingMap::chunk_at(int bucket, size_t offset, size_t count) const {
  const auto& chunks = chunks_[bucket];
  const auto it = std::lower_bound(chunks.begin(), chunks.end(), offset,
                                   [](const ElementRange& c, size_t o) { return c.offset < o; });
  CHECK(it != chunks.end() && it->offset == offset && it->count == count)
      << "no chunk [" << offset << ", +" << count << ") in bucket " << bucket;
  return static_cast<int>(it - chunks.begin());
}

namespace {

template <typename Dtype>
StagingMap MapOf(const StagingSetup<Dtype>& s) {
  std::vector<std::vector<size_t>> sizes;
  for (const auto& bucket : s.buckets) {
    sizes.emplace_back();
    for (const Blob<Dtype>* blob : bucket) sizes.back().push_back(static_cast<size_t>(blob->count()));
  }
  return StagingMap(sizes, s.chunk_elems);
}

// How the HOST path moves bytes between the gradients and the staging buffers. The device version queues copies
// on streams and waits on events; the host version (tests, in CPU training) copies at once. Either owns the
// staging buffers it hands out and frees them only once no copy can still use them.
class StagingCopies {
 public:
  virtual ~StagingCopies() = default;
  virtual void* AllocateHost(size_t bytes) = 0;
  // Main thread: the copies to the host queued from now on wait for the computation queued so far.
  virtual void AfterCompute() = 0;
  virtual void ToHost(void* host, const void* grad, size_t bytes) = 0;
  // Main thread: every ToHost copy of chunk `id` is queued.
  virtual void ToHostQueued(int id) = 0;
  // A communication thread: returns when chunk `id` is in its staging buffer.
  virtual void WaitToHost(int id) = 0;
  virtual void ToDevice(void* grad, const void* host, size_t bytes) = 0;
  // The thread that queued chunk `id`'s ToDevice copies: returns when they are done.
  virtual void WaitToDevice(int id) = 0;
};

class HostMemoryCopies : public StagingCopies {
 public:
  ~HostMemoryCopies() override {
    for (void* p : buffers_) std::free(p);
  }
  void* AllocateHost(size_t bytes) override {
    void* p = std::malloc(bytes);
    if (p == nullptr) STRATA_FAIL() << "out of host memory allocating " << human_bytes(bytes) << " of staging";
    buffers_.push_back(p);
    return p;
  }
  void AfterCompute() override {}
  void ToHost(void* host, const void* grad, size_t bytes) override { std::memcpy(host, grad, bytes); }
  void ToHostQueued(int) override {}
  void WaitToHost(int) override {}
  void ToDevice(void* grad, const void* host, size_t bytes) override { std::memcpy(grad, host, bytes); }
  void WaitToDevice(int) override {}

 private:
  std::vector<void*> buffers_;
};

#ifdef STRATA_USE_CUDA
// Events a waiting thread sleeps on instead of spinning on a core the computation needs, and that never time.
cudaEvent_t MakeWaitEvent() {
  cudaEvent_t e = nullptr;
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming));
  return e;
}

// Never throws (destructors): reports and carries on.
void LogIfFailed(cudaError_t err, const char* what) {
  if (err != cudaSuccess) LOG(ERROR) << what << ": " << cudaGetErrorString(err);
}

// The layers' kernels run on the legacy default stream (strata/cuda.hpp): "the compute stream" below. Copies to
// the host and back run on two non-blocking streams of their own, so they never wait for, nor hold up, the compute
// stream except where an event says so, and a reduced chunk going back does not queue behind copies out that still
// wait for backward (the GPU's copy engines serve each direction separately).
class CudaCopies : public StagingCopies {
 public:
  explicit CudaCopies(int chunks) {
    try {
      STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&to_host_stream_, cudaStreamNonBlocking));
      STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&to_device_stream_, cudaStreamNonBlocking));
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
      for (int i = 0; i < chunks; ++i) {
        on_host_.push_back(MakeWaitEvent());
        on_device_.push_back(MakeWaitEvent());
      }
    } catch (...) {
      Release();
      throw;
    }
  }
  ~CudaCopies() override { Release(); }

  void* AllocateHost(size_t bytes) override {
    // Pinned: the copies run at the bus's speed and asynchronously (a copy to pageable memory would block the
    // main thread until backward had reached it).
    void* p = nullptr;
    STRATA_CUDA_CHECK(cudaMallocHost(&p, bytes));
    buffers_.push_back(p);
    return p;
  }
  void AfterCompute() override {
    // The stream waits for the event as recorded now; re-recording it later does not change that wait.
    STRATA_CUDA_CHECK(cudaEventRecord(computed_, cudaStreamLegacy));
    STRATA_CUDA_CHECK(cudaStreamWaitEvent(to_host_stream_, computed_, 0));
  }
  void ToHost(void* host, const void* grad, size_t bytes) override {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(host, grad, bytes, cudaMemcpyDeviceToHost, to_host_stream_));
  }
  void ToHostQueued(int id) override { STRATA_CUDA_CHECK(cudaEventRecord(on_host_[id], to_host_stream_)); }
  void WaitToHost(int id) override { STRATA_CUDA_CHECK(cudaEventSynchronize(on_host_[id])); }
  void ToDevice(void* grad, const void* host, size_t bytes) override {
    STRATA_CUDA_CHECK(cudaMemcpyAsync(grad, host, bytes, cudaMemcpyHostToDevice, to_device_stream_));
  }
  void WaitToDevice(int id) override {
    // Other threads' copies queued before this record are waited for too: harmless, they are as short.
    STRATA_CUDA_CHECK(cudaEventRecord(on_device_[id], to_device_stream_));
    STRATA_CUDA_CHECK(cudaEventSynchronize(on_device_[id]));
  }

 private:
  void Release() {
    // Copies still queued (a run that ended early) must not land in freed memory.
    if (to_host_stream_) LogIfFailed(cudaStreamSynchronize(to_host_stream_), "cudaStreamSynchronize");
    if (to_device_stream_) LogIfFailed(cudaStreamSynchronize(to_device_stream_), "cudaStreamSynchronize");
    for (void* p : buffers_) LogIfFailed(cudaFreeHost(p), "cudaFreeHost");
    for (cudaEvent_t e : on_host_) LogIfFailed(cudaEventDestroy(e), "cudaEventDestroy");
    for (cudaEvent_t e : on_device_) LogIfFailed(cudaEventDestroy(e), "cudaEventDestroy");
    if (computed_) LogIfFailed(cudaEventDestroy(computed_), "cudaEventDestroy");
    if (to_host_stream_) LogIfFailed(cudaStreamDestroy(to_host_stream_), "cudaStreamDestroy");
    if (to_device_stream_) LogIfFailed(cudaStreamDestroy(to_device_stream_), "cudaStreamDestroy");
    buffers_.clear();
    on_host_.clear();
    on_device_.clear();
    computed_ = nullptr;
    to_host_stream_ = to_device_stream_ = nullptr;
  }

  cudaStream_t to_host_stream_ = nullptr;
  cudaStream_t to_device_stream_ = nullptr;
  cudaEvent_t computed_ = nullptr;
  std::vector<cudaEvent_t> on_host_, on_device_;  // by chunk id
  std::vector<void*> buffers_;
};
#endif  // STRATA_USE_CUDA

// The gradients' pointers where the copies read and write them: on the device in GPU training, on the host for the
// tests' CPU version. Main thread only (SyncedMemory is not thread-safe); the communication threads get them
// through the task queue's mutex.
template <typename Dtype>
void TakeGradientPointers(const std::vector<Blob<Dtype>*>& bucket, bool device, std::vector<Dtype*>* grads) {
  grads->resize(bucket.size());
  for (size_t slot = 0; slot < bucket.size(); ++slot) {
    (*grads)[slot] = device ? bucket[slot]->mutable_gpu_diff() : bucket[slot]->mutable_cpu_diff();
  }
}

template <typename Dtype>
class HostStaging : public GradientStaging<Dtype> {
 public:
  HostStaging(const StagingSetup<Dtype>& s, StagingMap map, std::unique_ptr<StagingCopies> copies,
              bool device)
      : buckets_(s.buckets), map_(std::move(map)), copies_(std::move(copies)), device_(device) {
    grads_.resize(buckets_.size());
    for (int b = 0; b < map_.num_buckets(); ++b) {
      const size_t bytes = sizeof(Dtype) * map_.elements(b);
      host_.push_back(static_cast<Dtype*>(copies_->AllocateHost(bytes)));
      bytes_ += bytes;
    }
    MemoryTracker::allocated(MemoryCategory::kOther, bytes_);
  }
  ~HostStaging() override {
    copies_.reset();
    MemoryTracker::released(MemoryCategory::kOther, bytes_);
  }

  void Stage(int bucket) override {
    std::vector<Dtype*>& grads = grads_[bucket];
    TakeGradientPointers(buckets_[bucket], device_, &grads);
    copies_->AfterCompute();
    for (int c = 0; c < static_cast<int>(map_.chunks(bucket).size()); ++c) {
      for (const auto& p : map_.pieces(bucket, c)) {
        copies_->ToHost(host_[bucket] + p.staging_offset, grads[p.slot] + p.grad_offset, sizeof(Dtype) * p.count);
      }
      copies_->ToHostQueued(map_.chunk_id(bucket, c));
    }
  }

  void Reduce(int bucket, size_t offset, size_t count, Allreduce& allreduce) override {
    const int c = map_.chunk_at(bucket, offset, count);
    const int id = map_.chunk_id(bucket, c);
    copies_->WaitToHost(id);
    Dtype* chunk = host_[bucket] + offset;
    // The same sum as CPU training's, so both give the same bits from the same gradients.
    if (allreduce.size() > 1) allreduce.run(chunk, count);
    const std::vector<Dtype*>& grads = grads_[bucket];
    for (const auto& p : map_.pieces(bucket, c)) {
      copies_->ToDevice(grads[p.slot] + p.grad_offset, host_[bucket] + p.staging_offset, sizeof(Dtype) * p.count);
    }
    copies_->WaitToDevice(id);
  }

  std::string describe() const override {
    std::ostringstream s;
    s << "HOST staging (" << map_.total_chunks() << " chunk(s), " << human_bytes(static_cast<double>(bytes_))
      << (device_ ? " pinned" : " of host memory, CPU test mode") << ")";
    return s.str();
  }

 private:
  std::vector<std::vector<Blob<Dtype>*>> buckets_;
  StagingMap map_;
  std::unique_ptr<StagingCopies> copies_;
  bool device_;
  std::vector<Dtype*> host_;                // each bucket's staging buffer
  std::vector<std::vector<Dtype*>> grads_;  // each bucket's gradient pointers, taken by Stage
  size_t bytes_ = 0;
};

#ifdef STRATA_HAVE_NCCL

// NCCL refuses two ranks on one GPU, with an error from deep inside ncclCommInitRank. Every rank compares every
// rank's GPU first, so all of them stop here with the same clear message and none waits in a collective.
void RequireOneGpuPerRank(MPI_Comm world) {
  int device = 0, rank = 0, size = 1;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  STRATA_MPI_CHECK(MPI_Comm_rank(world, &rank));
  STRATA_MPI_CHECK(MPI_Comm_size(world, &size));
  constexpr int kUuid = sizeof(prop.uuid.bytes);
  std::vector<char> all(static_cast<size_t>(kUuid) * size);
  STRATA_MPI_CHECK(MPI_Allgather(prop.uuid.bytes, kUuid, MPI_BYTE, all.data(), kUuid, MPI_BYTE, world));
  for (int i = 0; i < size; ++i) {
    for (int j = i + 1; j < size; ++j) {
      STRATA_REQUIRE(std::memcmp(&all[i * kUuid], &all[j * kUuid], kUuid) != 0)
          << "comm_param.gpu_path NCCL needs one GPU per rank, but ranks " << i << " and " << j
          << " use the same GPU (NCCL refuses that); use gpu_path HOST, which lets ranks share a GPU, or start no "
             "more ranks on a node than it has GPUs";
    }
  }
}

// The main thread queues every chunk's ncclAllReduce as it stages the bucket, in the same order on every rank (NCCL
// needs the calls on a communicator in one order and from one thread at a time); the communication threads only
// wait for the chunks' events. The update of a layer then starts as the CPU path's does.
template <typename Dtype>
class NcclStaging : public GradientStaging<Dtype> {
 public:
  NcclStaging(const StagingSetup<Dtype>& s, StagingMap map)
      : buckets_(s.buckets), map_(std::move(map)) {
    RequireOneGpuPerRank(s.world);
    int rank = 0, size = 1;
    STRATA_MPI_CHECK(MPI_Comm_rank(s.world, &rank));
    STRATA_MPI_CHECK(MPI_Comm_size(s.world, &size));
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (rank == 0) STRATA_NCCL(ncclGetUniqueId, &id);
    STRATA_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, s.world));
    try {
      STRATA_NCCL(ncclCommInitRank, &comm_, size, id, rank);
      STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
      for (int i = 0; i < map_.total_chunks(); ++i) reduced_.push_back(MakeWaitEvent());
    } catch (...) {
      Release();
      throw;
    }
    grads_.resize(buckets_.size());
  }
  ~NcclStaging() override { Release(); }

  void Stage(int bucket) override {
    std::vector<Dtype*>& grads = grads_[bucket];
    TakeGradientPointers(buckets_[bucket], true, &grads);
    STRATA_CUDA_CHECK(cudaEventRecord(computed_, cudaStreamLegacy));
    STRATA_CUDA_CHECK(cudaStreamWaitEvent(stream_, computed_, 0));
    for (int c = 0; c < static_cast<int>(map_.chunks(bucket).size()); ++c) {
      const auto& pieces = map_.pieces(bucket, c);
      // A packed bucket's gradients are separate buffers: one grouped launch reduces them all in place.
      if (pieces.size() > 1) STRATA_NCCL(ncclGroupStart);
      for (const auto& p : pieces) {
        Dtype* g = grads[p.slot] + p.grad_offset;
        STRATA_NCCL(ncclAllReduce, g, g, p.count, kType, ncclSum, comm_, stream_);
      }
      if (pieces.size() > 1) STRATA_NCCL(ncclGroupEnd);
      STRATA_CUDA_CHECK(cudaEventRecord(reduced_[map_.chunk_id(bucket, c)], stream_));
    }
  }

  void Reduce(int bucket, size_t offset, size_t count, Allreduce&) override {
    const int c = map_.chunk_at(bucket, offset, count);
    STRATA_CUDA_CHECK(cudaEventSynchronize(reduced_[map_.chunk_id(bucket, c)]));
  }

  std::string describe() const override {
    int version = 0;
    cuda::nccl_api().ncclGetVersion(&version);
    std::ostringstream s;
    s << "NCCL " << version / 10000 << "." << (version / 100) % 100 << "." << version % 100 << " in device memory ("
      << map_.total_chunks() << " chunk(s))";
    return s.str();
  }

 private:
  void Release() {
    // Normally every chunk was waited for (the engine drains first); after an error the job is being aborted.
    if (stream_) LogIfFailed(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    if (comm_) {
      const cuda::NcclApi& nccl = cuda::nccl_api();
      const ncclResult_t r = nccl.ncclCommDestroy(comm_);
      if (r != ncclSuccess) LOG(ERROR) << "ncclCommDestroy: " << nccl.ncclGetErrorString(r);
    }
    for (cudaEvent_t e : reduced_) LogIfFailed(cudaEventDestroy(e), "cudaEventDestroy");
    if (computed_) LogIfFailed(cudaEventDestroy(computed_), "cudaEventDestroy");
    if (stream_) LogIfFailed(cudaStreamDestroy(stream_), "cudaStreamDestroy");
    comm_ = nullptr;
    reduced_.clear();
    computed_ = nullptr;
    stream_ = nullptr;
  }

  static constexpr ncclDataType_t kType = sizeof(Dtype) == sizeof(float) ? ncclFloat : ncclDouble;
  std::vector<std::vector<Blob<Dtype>*>> buckets_;
  StagingMap map_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t computed_ = nullptr;
  std::vector<cudaEvent_t> reduced_;  // by chunk id
  std::vector<std::vector<Dtype*>> grads_;
};
#endif  // STRATA_HAVE_NCCL

}  // namespace

template <typename Dtype>
std::unique_ptr<GradientStaging<Dtype>> MakeGradientStaging(const StagingSetup<Dtype>& s) {
  const bool gpu = Strata::mode() == Strata::GPU;
  STRATA_REQUIRE(gpu || s.path != CommParameter::NCCL)
      << "comm_param.gpu_path NCCL applies to GPU training (solver_mode: GPU or --gpu), but this run is on the CPU";
  if (!gpu) {
    if (!s.stage_in_cpu_mode) return nullptr;
    return std::make_unique<HostStaging<Dtype>>(s, MapOf(s), std::make_unique<HostMemoryCopies>(), false);
  }
#ifdef STRATA_USE_CUDA
  if (s.path == CommParameter::NCCL) {
#ifdef STRATA_HAVE_NCCL
    return std::make_unique<NcclStaging<Dtype>>(s, MapOf(s));
#else
    STRATA_FAIL() << "comm_param.gpu_path NCCL, but this build of Strata has no NCCL (CMake found no nccl.h and "
                     "libnccl, or STRATA_USE_NCCL was OFF); use gpu_path HOST or rebuild with NCCL";
#endif
  }
  StagingMap map = MapOf(s);
  auto copies = std::make_unique<CudaCopies>(map.total_chunks());
  return std::make_unique<HostStaging<Dtype>>(s, std::move(map), std::move(copies), true);
#else
  STRATA_FAIL() << "GPU training, but this build of Strata has no GPU support";
  return nullptr;
#endif
}

template std::unique_ptr<GradientStaging<float>> MakeGradientStaging(const StagingSetup<float>&);
template std::unique_ptr<GradientStaging<double>> MakeGradientStaging(const StagingSetup<double>&);

}  // namespace strata
