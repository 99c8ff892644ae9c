// A block of memory that lives on the host, the device, or both, copied lazily to wherever it is read
// next (Caffe's SyncedMemory). Allocations are counted by MemoryTracker under the block's category.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "strata/common.hpp"
#include "strata/memory_format.hpp"
#include "strata/memory_tracker.hpp"

namespace strata {

class SyncedMemory {
 public:
  enum SyncedHead { UNINITIALIZED, HEAD_AT_CPU, HEAD_AT_GPU, SYNCED };

  explicit SyncedMemory(size_t size = 0, MemoryCategory category = MemoryCategory::kOther);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  // The host bytes in the plain layout (converted back first if a layer left them blocked).
  const void* cpu_data();
  void* mutable_cpu_data();
  // The host bytes in `layout`; a blocked layout is made for `shape`. The mutable form converts the current
  // contents unless `keep_values` is false: the caller overwrites them all, so memory allocated for it is not
  // zeroed (every layout is a permutation of the same bytes, with no padding to leave unwritten).
  const void* cpu_data_in(MemoryFormat layout, const LayoutShape& shape);
  void* mutable_cpu_data_in(MemoryFormat layout, const LayoutShape& shape, bool keep_values = true);
  MemoryFormat layout() const { return layout_; }
  // The host bytes in a parameter's CustomFormat (memory_format.hpp), converted in place when they are in another.
  const void* cpu_data_as(const CustomFormatPtr& layout);
  void* mutable_cpu_data_as(const CustomFormatPtr& layout, bool keep_values = true);
  // The CustomFormat the host bytes are in (null unless layout() is kCustom).
  const CustomFormatPtr& custom_layout() const { return custom_; }
  // The host bytes as they are, in whatever layout: for sums, scales and elementwise work with memory known to be
  // in the same layout (a parameter's value, gradient and solver history).
  const void* cpu_data_as_is();
  void* mutable_cpu_data_as_is();
  // What the blocked layout was made for (meaningful while layout() is kBlocked16).
  const LayoutShape& blocked_shape() const { return blocked_shape_; }
  // Points the host side at memory owned by someone else (not freed, not counted).
  void set_cpu_data(void* data);
  // The device bytes in the plain layout and the blob's own element type (converted back first if a layer left
  // them in bfloat16 or channels-last).
  const void* gpu_data();
  void* mutable_gpu_data();
  void set_gpu_data(void* data);
  // The device bytes in `format`, converted in place when they are in another (memory_format.hpp); a channels-last
  // format is made for `shape` (its elem_size ignored), and converts back with the shape it was made for. Converting
  // to bfloat16 rounds, so even a read leaves only the rounded values (the host copy becomes stale). Only a float
  // block of activations, gradients or scratch, in device memory of its own, may be held in a format other than the
  // plain one: never a parameter, which the solver updates in place.
  const void* gpu_data_in(DeviceFormat format, const LayoutShape& shape = {});
  void* mutable_gpu_data_in(DeviceFormat format, bool keep_values = true, const LayoutShape& shape = {});
  DeviceFormat device_format() const { return device_format_; }
  // What channels-last device memory was made for (meaningful while device_format() is channels-last).
  const LayoutShape& device_shape() const { return device_shape_; }
  // Counts the accesses that may change the contents (the mutable accessors, set_*_data, release): a copy made
  // from the contents (a layer's bfloat16 weights) is current while it is unchanged.
  uint64_t version() const { return version_; }

  // Frees both copies; the next access allocates zeroed memory again (not zeroed for a keep_values-false writer).
  // Used by the recompute executor to drop activations it will rebuild. While an outside view holds the host
  // bytes it changes nothing: they stay, and later passes write into them as if they were kept.
  void release();
  // A view from outside (a NumPy array over the host bytes) starts or stops holding them.
  void add_host_view() { ++host_views_; }
  void remove_host_view() { --host_views_; }
  // Fills the memory a keep_values-false writer gets fresh with NaNs instead of leaving it as the allocator gave
  // it, so that a writer that leaves a value unwritten shows in its results. The test binaries turn it on.
  static void set_poison_fresh_writes(bool poison);
  // How many times memory of a category has been copied from the device to the host since the process began: what
  // a test reads to see that a GPU path keeps its values on the device.
  static uint64_t copies_to_host(MemoryCategory category);

  SyncedHead head() const { return head_; }
  size_t size() const { return size_; }
  MemoryCategory category() const { return category_; }
  // Moves this block (and its host and device bytes, if allocated) to another tracker category.
  void set_category(MemoryCategory c);
  // Bytes this block currently holds on the host (0 when released or not yet touched).
  size_t resident_bytes() const { return (cpu_ptr_ && own_cpu_data_) ? size_ : 0; }
  // The device bytes this block owns (half of size() while they are in bfloat16, in either order).
  size_t device_bytes() const { return (gpu_ptr_ && own_gpu_data_) ? gpu_bytes_ : 0; }

 private:
  // Allocates fresh host memory zeroed unless `zero_fresh` is false (a writer that overwrites every value).
  void to_cpu(bool zero_fresh = true);
  void to_gpu();
  // Rearranges the host bytes into `to` (for `shape` when that is blocked, as `custom` says when that is custom).
  void relayout(MemoryFormat to, const LayoutShape& shape, const CustomFormatPtr& custom = nullptr);
  void free_cpu();
  void free_gpu();
  // Device memory of our own, on the current device, in `format` (for `shape` when channels-last).
  void alloc_gpu(DeviceFormat format = DeviceFormat::kPlain, const LayoutShape& shape = {});
  bool in_device_format(DeviceFormat format, const LayoutShape& shape) const;
  // Fails unless `shape` is an (N, C, S) with channels and positions that fits the memory (channels-last's).
  void check_channels_last(const LayoutShape& shape) const;
  // Converts the device bytes into `format` in a new allocation (GPU builds).
  void reformat_gpu(DeviceFormat format, const LayoutShape& shape);

  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_;
  MemoryCategory category_;
  SyncedHead head_ = UNINITIALIZED;
  bool own_cpu_data_ = false;
  bool cpu_pinned_ = false;  // cpu_ptr_ came from cudaMallocHost
  bool own_gpu_data_ = false;
  [[maybe_unused]] int device_ = -1;  // where gpu_ptr_ lives (read in GPU builds only)
  size_t gpu_bytes_ = 0;
  DeviceFormat device_format_ = DeviceFormat::kPlain;
  LayoutShape device_shape_;
  uint64_t version_ = 0;
  MemoryFormat layout_ = MemoryFormat::kPlain;
  LayoutShape blocked_shape_;
  CustomFormatPtr custom_;
  std::atomic<int> host_views_{0};  // changed by Python's threads while a pass releases
};

}  // namespace strata
