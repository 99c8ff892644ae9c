#include "strata/syncedmem.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "device_memory.hpp"
#include "strata/cuda.hpp"

namespace strata {

namespace {
#ifdef __GLIBC__
// Under a recomputation plan the executor frees activations, gradients and saved state as backward passes
// them, and the next forward allocates them again. glibc serves blocks above its (dynamic) mmap threshold with
// fresh mappings and trims freed heap tops back to the kernel, so every iteration would fault each page in
// again, zeroed by the kernel before our own memset: a third more time on ResNet-50. Blocks up to 32 MiB (the
// largest threshold glibc accepts) therefore come from the heap, and freed heap memory stays in the process for
// the next iteration; the process's footprint follows the peak of what is in use, not the sum of what was.
const bool keep_freed_host_memory = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  return true;
}();
#endif

// 64-byte alignment keeps AVX loads aligned and rows of GEMM operands on cache-line boundaries. In GPU mode the
// host copy is pinned (page-locked): transfers then run at the bus's full speed straight from it instead of
// being staged through a driver buffer, and asynchronous copies can overlap kernels.
void* host_alloc(size_t size, bool* pinned) {
  MemoryTracker::check_host_limit(size);
  void* ptr = nullptr;
  *pinned = false;
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) {
    const cudaError_t err = cudaMallocHost(&ptr, size > 0 ? size : 1);
    if (err == cudaSuccess) {
      *pinned = true;
      return ptr;
    }
    // Pinned memory is a limited resource; ordinary memory still works, only slower to transfer.
    cudaGetLastError();
    LOG_FIRST_N(WARNING, 1) << "cudaMallocHost(" << human_bytes(size) << ") failed (" << cudaGetErrorString(err)
                            << "); using pageable host memory";
  }
#endif
  const size_t rounded = (size + 63) / 64 * 64;
  if (posix_memalign(&ptr, 64, rounded) != 0 || ptr == nullptr) {
    STRATA_FAIL() << "out of host memory allocating " << human_bytes(size);
  }
  return ptr;
}

[[maybe_unused]] constexpr const char* kNoGpuSupport =
    "this build of Strata has no GPU support (no CUDA toolkit was found at build time)";

// Tests only (set_poison_fresh_writes): set before any thread allocates.
bool poison_fresh_writes = false;
std::atomic<uint64_t> copies_to_host_of[MemoryTracker::kNumCategories];
constexpr int kPoisonByte = 0xFF;  // all ones: a NaN in float, double and bfloat16

// Whether two channels-last shapes order the same values alike (the element type is the format's).
bool same_images(const LayoutShape& a, const LayoutShape& b) {
  return a.num == b.num && a.channels == b.channels && a.spatial == b.spatial;
}

void host_free(void* ptr, bool pinned) {
#ifdef STRATA_USE_CUDA
  if (pinned) {
    // Never throw from here (destructors): report and carry on.
    const cudaError_t err = cudaFreeHost(ptr);
    if (err != cudaSuccess) LOG(ERROR) << "cudaFreeHost: " << cudaGetErrorString(err);
    return;
  }
#endif
  std::free(ptr);
}
}  // namespace

SyncedMemory::SyncedMemory(size_t size, MemoryCategory category) : size_(size), category_(category) {}

SyncedMemory::~SyncedMemory() {
  free_cpu();
  free_gpu();
}

void SyncedMemory::free_cpu() {
  if (cpu_ptr_ && own_cpu_data_) {
    host_free(cpu_ptr_, cpu_pinned_);
    MemoryTracker::released(category_, size_);
  }
  cpu_ptr_ = nullptr;
  own_cpu_data_ = false;
  cpu_pinned_ = false;
}

void SyncedMemory::free_gpu() {
#ifdef STRATA_USE_CUDA
  if (gpu_ptr_ && own_gpu_data_) {
    cuda::device_free(gpu_ptr_);
    MemoryTracker::released(category_, gpu_bytes_, MemorySpace::kDevice);
  }
#endif
  gpu_ptr_ = nullptr;
  gpu_bytes_ = 0;
  own_gpu_data_ = false;
  device_format_ = DeviceFormat::kPlain;
  device_shape_ = {};
}

void SyncedMemory::alloc_gpu(DeviceFormat format, const LayoutShape& shape) {
#ifdef STRATA_USE_CUDA
  if (format != DeviceFormat::kPlain) {
    CHECK(category_ != MemoryCategory::kParameter)
        << "a parameter's device memory is never held in " << format_name(format);
    CHECK_EQ(size_ % sizeof(float), 0u) << "only float memory is held in " << format_name(format);
  }
  if (is_channels_last(format)) check_channels_last(shape);
  STRATA_CUDA_CHECK(cudaGetDevice(&device_));
  // Nothing changes until the block is there: an allocation that throws (the device full) leaves the memory as it was.
  const size_t bytes = is_16bit(format) ? size_ / 2 : size_;
  gpu_ptr_ = cuda::device_alloc(bytes);
  gpu_bytes_ = bytes;
  own_gpu_data_ = true;
  device_format_ = format;
  device_shape_ = is_channels_last(format) ? shape : LayoutShape{};
  MemoryTracker::allocated(category_, gpu_bytes_, MemorySpace::kDevice);
#else
  (void)format;
  (void)shape;
  LOG(FATAL) << kNoGpuSupport;
#endif
}

void SyncedMemory::check_channels_last(const LayoutShape& shape) const {
  CHECK(shape.num >= 0 && shape.channels > 0 && shape.spatial > 0 && shape.count() * sizeof(float) <= size_)
      << "channels-last device memory needs its (N, C, S) within the memory: " << shape.num << " x " << shape.channels
      << " x " << shape.spatial << " in " << size_ << " bytes";
}

bool SyncedMemory::in_device_format(DeviceFormat format, const LayoutShape& shape) const {
  return format == device_format_ && (!is_channels_last(format) || same_images(shape, device_shape_));
}

void SyncedMemory::reformat_gpu(DeviceFormat format, const LayoutShape& shape) {
  if (in_device_format(format, shape)) return;
#ifdef STRATA_USE_CUDA
  CHECK(own_gpu_data_) << "cannot convert device memory owned elsewhere to another format";
  // Channels-last made for another shape (the blob was reshaped) goes back to channels-first first.
  if (is_channels_last(device_format_) && is_channels_last(format) && !same_images(shape, device_shape_)) {
    reformat_gpu(device_format_for(element_type_of(device_format_), false), {});
  }
  // The channels-last side of the conversion: the memory's own shape going back, the one asked for going there.
  const bool layout_change = is_channels_last(format) != is_channels_last(device_format_);
  const LayoutShape last = is_channels_last(device_format_) ? device_shape_ : shape;
  // With one channel, or one position per image (a global pooling's output), both orders are the same bytes.
  if (layout_change && element_type_of(format) == element_type_of(device_format_) &&
      (last.channels == 1 || last.spatial == 1)) {
    if (is_channels_last(format)) check_channels_last(shape);
    device_format_ = format;
    device_shape_ = is_channels_last(format) ? shape : LayoutShape{};
    return;
  }
  // Stream-ordered: the old block returns to the pool once the conversion that reads it has run. alloc_gpu replaces
  // gpu_ptr_ only once the new block is there.
  void* from = gpu_ptr_;
  const size_t from_bytes = gpu_bytes_;
  const DeviceFormat from_format = device_format_;
  alloc_gpu(format, shape);
  gpu_reformat(layout_change ? last.count() : size_ / sizeof(float), last, from_format, from, format, gpu_ptr_);
  cuda::device_free(from);
  MemoryTracker::released(category_, from_bytes, MemorySpace::kDevice);
#else
  (void)shape;
  LOG(FATAL) << "GPU memory in a CPU-only build";
#endif
}

void SyncedMemory::set_category(MemoryCategory c) {
  if (c == category_) return;
  const size_t held = resident_bytes(), on_device = device_bytes();
  if (held) {
    MemoryTracker::released(category_, held);
    MemoryTracker::allocated(c, held);
  }
  if (on_device) {
    MemoryTracker::released(category_, on_device, MemorySpace::kDevice);
    MemoryTracker::allocated(c, on_device, MemorySpace::kDevice);
  }
  category_ = c;
}

void SyncedMemory::set_poison_fresh_writes(bool poison) { poison_fresh_writes = poison; }

uint64_t SyncedMemory::copies_to_host(MemoryCategory category) {
  return copies_to_host_of[static_cast<int>(category)].load();
}

void SyncedMemory::release() {
  if (host_views_ > 0) return;
  free_cpu();
  free_gpu();
  ++version_;
  head_ = UNINITIALIZED;
  layout_ = MemoryFormat::kPlain;
  custom_ = nullptr;
}

void SyncedMemory::relayout(MemoryFormat to, const LayoutShape& shape, const CustomFormatPtr& custom) {
  if (to == layout_ && (to != MemoryFormat::kCustom || SameFormat(custom.get(), custom_.get()))) return;
  if (to != MemoryFormat::kPlain && layout_ != MemoryFormat::kPlain) relayout(MemoryFormat::kPlain, {});
  size_t bytes = 0;
  if (to == MemoryFormat::kBlocked16 || layout_ == MemoryFormat::kBlocked16) {
    const LayoutShape& s = to == MemoryFormat::kBlocked16 ? shape : blocked_shape_;
    bytes = s.count() * s.elem_size;
  } else {
    bytes = (to == MemoryFormat::kCustom ? custom : custom_)->bytes();
  }
  CHECK_LE(bytes, size_) << "a layout larger than its memory";
  // Through a scratch copy of this thread's (kept for the next conversion): only the first layer that cannot read
  // the blocked layout converts, once per pass.
  thread_local std::unique_ptr<char, decltype(&std::free)> scratch{nullptr, &std::free};
  thread_local size_t scratch_size = 0;
  if (bytes > scratch_size) {
    scratch.reset();
    scratch.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    CHECK(scratch) << "cannot allocate " << bytes << " bytes to change a blob's layout";
    scratch_size = (bytes + 63) / 64 * 64;
  }
  if (to == MemoryFormat::kBlocked16) {
    ToBlocked16(shape, cpu_ptr_, scratch.get());
  } else if (to == MemoryFormat::kCustom) {
    custom->ToLayout(cpu_ptr_, scratch.get());
  } else if (layout_ == MemoryFormat::kBlocked16) {
    FromBlocked16(blocked_shape_, cpu_ptr_, scratch.get());
  } else {
    custom_->FromLayout(cpu_ptr_, scratch.get());
  }
  std::memcpy(cpu_ptr_, scratch.get(), bytes);
  layout_ = to;
  if (to == MemoryFormat::kBlocked16) blocked_shape_ = shape;
  custom_ = to == MemoryFormat::kCustom ? custom : nullptr;
}

void SyncedMemory::to_cpu(bool zero_fresh) {
  switch (head_) {
    case UNINITIALIZED:
      cpu_ptr_ = host_alloc(size_, &cpu_pinned_);
      if (zero_fresh || poison_fresh_writes) std::memset(cpu_ptr_, zero_fresh ? 0 : kPoisonByte, size_);
      own_cpu_data_ = true;
      layout_ = MemoryFormat::kPlain;
      custom_ = nullptr;
      MemoryTracker::allocated(category_, size_);
      head_ = HEAD_AT_CPU;
      break;
    case HEAD_AT_GPU:
#ifdef STRATA_USE_CUDA
      if (cpu_ptr_ == nullptr) {
        cpu_ptr_ = host_alloc(size_, &cpu_pinned_);
        own_cpu_data_ = true;
        MemoryTracker::allocated(category_, size_);
      }
      STRATA_CUDA_CHECK(cudaMemcpy(cpu_ptr_, gpu_ptr_, gpu_bytes_, cudaMemcpyDeviceToHost));
      ++copies_to_host_of[static_cast<int>(category_)];
      device_copy_to_plain_in_place(device_format_, size_ / sizeof(float), device_shape_, cpu_ptr_);
      head_ = SYNCED;
      layout_ = MemoryFormat::kPlain;
      custom_ = nullptr;
#else
      LOG(FATAL) << "GPU memory in a CPU-only build";
#endif
      break;
    case HEAD_AT_CPU:
    case SYNCED:
      break;
  }
}

void SyncedMemory::to_gpu() {
#ifdef STRATA_USE_CUDA
  switch (head_) {
    case UNINITIALIZED:
      alloc_gpu();
      STRATA_CUDA_CHECK(cudaMemset(gpu_ptr_, 0, size_));
      head_ = HEAD_AT_GPU;
      break;
    case HEAD_AT_CPU:
      if (device_format_ != DeviceFormat::kPlain) free_gpu();  // the host's plain floats replace the device's copy
      if (gpu_ptr_ == nullptr) alloc_gpu();
      STRATA_CUDA_CHECK(cudaMemcpy(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice));
      head_ = SYNCED;
      break;
    case HEAD_AT_GPU:
    case SYNCED:
      break;
  }
#else
  LOG(FATAL) << kNoGpuSupport;
#endif
}

const void* SyncedMemory::cpu_data() { return cpu_data_in(MemoryFormat::kPlain, {}); }

void* SyncedMemory::mutable_cpu_data() { return mutable_cpu_data_in(MemoryFormat::kPlain, {}); }

const void* SyncedMemory::cpu_data_in(MemoryFormat layout, const LayoutShape& shape) {
  to_cpu();
  if (layout != layout_ || (layout == MemoryFormat::kBlocked16 && !(shape == blocked_shape_))) {
    // Converting keeps the values, so a read may do it; the device copy (if any) is plain and stays valid.
    relayout(MemoryFormat::kPlain, {});
    relayout(layout, shape);
  }
  return cpu_ptr_;
}

const void* SyncedMemory::cpu_data_as(const CustomFormatPtr& layout) {
  CHECK(layout) << "no custom layout given";
  CHECK_LE(layout->bytes(), size_) << "a custom layout larger than its memory";
  to_cpu();
  relayout(MemoryFormat::kCustom, {}, layout);
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data_as(const CustomFormatPtr& layout, bool keep_values) {
  ++version_;
  if (keep_values && head_ != UNINITIALIZED) {
    cpu_data_as(layout);
  } else {
    CHECK(layout) << "no custom layout given";
    to_cpu(/*zero_fresh=*/keep_values);
    layout_ = MemoryFormat::kCustom;
    custom_ = layout;
  }
  head_ = HEAD_AT_CPU;
  return cpu_ptr_;
}

const void* SyncedMemory::cpu_data_as_is() {
  to_cpu();
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data_as_is() {
  ++version_;
  to_cpu();
  head_ = HEAD_AT_CPU;
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data_in(MemoryFormat layout, const LayoutShape& shape, bool keep_values) {
  ++version_;
  if (keep_values && head_ != UNINITIALIZED) {
    cpu_data_in(layout, shape);
  } else {
    // Fresh memory is zeros, the same in every layout, unless the caller overwrites every value anyway.
    to_cpu(/*zero_fresh=*/keep_values);
    layout_ = layout;
    if (layout == MemoryFormat::kBlocked16) blocked_shape_ = shape;
    custom_ = nullptr;
  }
  head_ = HEAD_AT_CPU;
  return cpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CHECK(data);
  free_cpu();
  ++version_;
  layout_ = MemoryFormat::kPlain;
  custom_ = nullptr;
  cpu_ptr_ = data;
  own_cpu_data_ = false;
  head_ = HEAD_AT_CPU;
}

const void* SyncedMemory::gpu_data() { return gpu_data_in(DeviceFormat::kPlain, {}); }

void* SyncedMemory::mutable_gpu_data() { return mutable_gpu_data_in(DeviceFormat::kPlain, true, {}); }

const void* SyncedMemory::gpu_data_in(DeviceFormat format, const LayoutShape& shape) {
  if (layout_ != MemoryFormat::kPlain) cpu_data();  // the host's blocked layouts never reach the device
  to_gpu();
  if (!in_device_format(format, shape)) {
    reformat_gpu(format, shape);
    if (is_16bit(format)) head_ = HEAD_AT_GPU;  // the host's copy may have values the device rounded
  }
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data_in(DeviceFormat format, bool keep_values, const LayoutShape& shape) {
  ++version_;
  if (keep_values || (gpu_ptr_ && !own_gpu_data_)) {
    gpu_data_in(format, shape);
  } else {
    if (gpu_ptr_ == nullptr || !in_device_format(format, shape)) {
      // The caller overwrites every value: nothing to convert or zero. Marked empty first, so that an allocation that
      // throws leaves no head pointing at the freed block.
      free_gpu();
      if (head_ == SYNCED || head_ == HEAD_AT_GPU) head_ = cpu_ptr_ ? HEAD_AT_CPU : UNINITIALIZED;
      alloc_gpu(format, shape);
#ifdef STRATA_USE_CUDA
      if (poison_fresh_writes) STRATA_CUDA_CHECK(cudaMemset(gpu_ptr_, kPoisonByte, gpu_bytes_));
#endif
    }
    // The host's copy is stale from here, whatever layout it was in; a later read brings it back plain.
    layout_ = MemoryFormat::kPlain;
    custom_ = nullptr;
  }
  head_ = HEAD_AT_GPU;
  return gpu_ptr_;
}

void SyncedMemory::set_gpu_data(void* data) {
  CHECK(data);
  free_gpu();
  ++version_;
  gpu_ptr_ = data;
  gpu_bytes_ = size_;
  own_gpu_data_ = false;
  head_ = HEAD_AT_GPU;
}

}  // namespace strata
