// Blob: an N-d array with a value (data) and a gradient (diff), each in its own SyncedMemory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/common.hpp"
#include "strata/proto/strata.pb.h"
#include "strata/syncedmem.hpp"

namespace strata {

constexpr int kMaxBlobAxes = 32;

template <typename Dtype>
class Blob {
 public:
  Blob() = default;
  explicit Blob(const std::vector<int>& shape) { Reshape(shape); }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape; memory grows lazily (never shrinks) on the next access.
  void Reshape(const std::vector<int>& shape);
  void Reshape(const BlobShape& shape);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  const std::vector<int>& shape() const { return shape_; }
  // Shape along `index`; negative indices count from the end.
  int shape(int index) const { return shape_[CanonicalAxisIndex(index)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int count() const { return count_; }
  // Product of dimensions in [start_axis, end_axis).
  int count(int start_axis, int end_axis) const;
  int count(int start_axis) const { return count(start_axis, num_axes()); }
  int CanonicalAxisIndex(int axis_index) const;
  std::string shape_string() const;

  // Legacy 4-D accessors (axes beyond the shape read as 1).
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;

  int offset(int n, int c = 0, int h = 0, int w = 0) const;
  int offset(const std::vector<int>& indices) const;

  const Dtype* cpu_data() const;
  const Dtype* cpu_diff() const;
  Dtype* mutable_cpu_data();
  Dtype* mutable_cpu_diff();
  const Dtype* gpu_data() const;
  const Dtype* gpu_diff() const;
  Dtype* mutable_gpu_data();
  Dtype* mutable_gpu_diff();

  // Layouts (strata/memory_format.hpp). Every accessor above gives the plain layout, converting in place when a
  // layout-aware layer left the memory blocked. can_block(): 4 axes with channels a multiple of 16. The *_layout()
  // are the layouts the memory is in now for this blob's shape; the *_in accessors give the memory in `layout`,
  // converting it if needed (not with keep_values false: the caller overwrites every value).
  bool can_block() const;
  MemoryFormat data_layout() const;
  MemoryFormat diff_layout() const;
  const Dtype* cpu_data_in(MemoryFormat layout) const;
  const Dtype* cpu_diff_in(MemoryFormat layout) const;
  Dtype* mutable_cpu_data_in(MemoryFormat layout, bool keep_values = true);
  Dtype* mutable_cpu_diff_in(MemoryFormat layout, bool keep_values = true);
  // Parameters in a layer's CustomFormat (memory_format.hpp): the memory in `layout`, converted in place when it is
  // in another, and the CustomFormat the value is in now (null when none).
  const Dtype* cpu_data_as(const CustomFormatPtr& layout) const;
  Dtype* mutable_cpu_data_as(const CustomFormatPtr& layout, bool keep_values = true);
  Dtype* mutable_cpu_diff_as(const CustomFormatPtr& layout, bool keep_values = true);
  CustomFormatPtr data_custom_layout() const;
  // Brings the gradient, and `other`'s value (a solver's history for this parameter), into the layout the value is
  // in; then the *_as_is accessors give all of them in one layout, for elementwise work on the host.
  void AlignDiffWithData();
  void AlignWithData(Blob& other) const;
  // The host memory as it is, in whatever layout (sums, scales, elementwise work on aligned memory).
  const Dtype* cpu_data_as_is() const;
  const Dtype* cpu_diff_as_is() const;
  Dtype* mutable_cpu_data_as_is();
  Dtype* mutable_cpu_diff_as_is();
  // The device memory in 16 bits (bfloat16 or float16, as `format` says), for layers that compute in them on the
  // GPU; float blobs only. `format` is one of the 16-bit formats (channels-last: blobs that can_channels_last()). The
  // memory is converted in place when it is in another format (rounding, from float), and every accessor above
  // converts it back. Layers read it typed through src/strata/layers/device_storage.cuh's gpu_data_as.
  const void* gpu_data_16bit(DeviceFormat format) const;
  const void* gpu_diff_16bit(DeviceFormat format) const;
  void* mutable_gpu_data_16bit(DeviceFormat format, bool keep_values = true);
  void* mutable_gpu_diff_16bit(DeviceFormat format, bool keep_values = true);
  // The device memory in the blob's own type, in `format`: kPlain (as gpu_data()) or kNhwc (float channels-last, for
  // float layers on the GPU: docs/gpu.md, "Channels-last"), converted in place when it is in another.
  const Dtype* gpu_data_in(DeviceFormat format) const;
  const Dtype* gpu_diff_in(DeviceFormat format) const;
  Dtype* mutable_gpu_data_in(DeviceFormat format, bool keep_values = true);
  Dtype* mutable_gpu_diff_in(DeviceFormat format, bool keep_values = true);
  // 4 axes: (N, C, H, W), channels-last as (N, H, W, C).
  bool can_channels_last() const { return num_axes() == 4; }
  // The format the device memory is in now, for this blob's shape: memory left channels-last for a blob of another
  // shape that shares it (Flatten, Reshape) is in no order of this one's, its element type's plain format to it (a
  // read converts).
  DeviceFormat data_device_format() const;
  DeviceFormat diff_device_format() const;
  // Points data at memory owned elsewhere; used to hand a preallocated buffer to a layer.
  void set_cpu_data(Dtype* data);

  Dtype data_at(int n, int c, int h, int w) const { return cpu_data()[offset(n, c, h, w)]; }
  Dtype diff_at(int n, int c, int h, int w) const { return cpu_diff()[offset(n, c, h, w)]; }
  Dtype data_at(const std::vector<int>& index) const { return cpu_data()[offset(index)]; }
  Dtype diff_at(const std::vector<int>& index) const { return cpu_diff()[offset(index)]; }

  const std::shared_ptr<SyncedMemory>& data() const { return data_; }
  const std::shared_ptr<SyncedMemory>& diff() const { return diff_; }

  // data -= diff (the plain gradient step, lr already folded into diff).
  void Update();
  Dtype asum_data() const;
  Dtype asum_diff() const;
  Dtype sumsq_data() const;
  Dtype sumsq_diff() const;
  void scale_data(Dtype factor);
  void scale_diff(Dtype factor);
  // Zeroes the gradient where the current mode keeps it (on the device in GPU mode, not on a host copy).
  void clear_diff();

  // Make this blob use `other`'s value or gradient memory (shapes must have equal counts).
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);
  // Copies values (or gradients) from `source`; reshapes this blob when `reshape` is true.
  void CopyFrom(const Blob& source, bool copy_diff = false, bool reshape = false);

  // Reads a BlobProto; the shapes must agree unless `reshape` is true.
  void FromProto(const BlobProto& proto, bool reshape = true);
  void ToProto(BlobProto* proto, bool write_diff = false) const;
  bool ShapeEquals(const BlobProto& other) const;

  // Which MemoryTracker category this blob's memory counts under (set before the first access).
  void set_memory_category(MemoryCategory c);
  MemoryCategory memory_category() const { return category_; }
  // Drops the memory (both data and diff); it comes back zeroed on the next access.
  void release_memory();
  // Whether the data currently has memory behind it (false after release_memory, until the next access).
  bool has_data() const;
  // Bytes currently held on the host by data and diff.
  size_t resident_bytes() const;

 private:
  LayoutShape blocked_shape() const;
  MemoryFormat layout_of(const SyncedMemory& m) const;
  // What `format` is made for: this blob's (N, C, H x W) for channels-last, nothing otherwise.
  LayoutShape device_shape(DeviceFormat format) const;
  DeviceFormat device_format_of(const SyncedMemory& m) const;

  std::shared_ptr<SyncedMemory> data_;
  std::shared_ptr<SyncedMemory> diff_;
  std::vector<int> shape_;
  int count_ = 0;
  int capacity_ = 0;
  MemoryCategory category_ = MemoryCategory::kOther;
};

}  // namespace strata
