#include "strata/blob.hpp"

#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
void Blob<Dtype>::Reshape(const std::vector<int>& shape) {
  STRATA_REQUIRE(shape.size() <= static_cast<size_t>(kMaxBlobAxes))
      << "a blob may have at most " << kMaxBlobAxes << " axes, got " << shape.size();
  long long count = 1;
  for (int d : shape) {
    STRATA_REQUIRE(d >= 0) << "negative blob dimension " << d;
    count *= d;
    STRATA_REQUIRE(count <= INT_MAX) << "blob of more than INT_MAX elements";
  }
  shape_ = shape;
  count_ = static_cast<int>(count);
  if (count_ > capacity_) {
    capacity_ = count_;
    data_ = std::make_shared<SyncedMemory>(capacity_ * sizeof(Dtype), category_);
    diff_ = std::make_shared<SyncedMemory>(capacity_ * sizeof(Dtype), category_);
  }
}

template <typename Dtype>
void Blob<Dtype>::Reshape(const BlobShape& shape) {
  std::vector<int> dims(shape.dim_size());
  for (int i = 0; i < shape.dim_size(); ++i) {
    STRATA_REQUIRE(shape.dim(i) >= 0 && shape.dim(i) <= INT_MAX) << "bad blob dimension " << shape.dim(i);
    dims[i] = static_cast<int>(shape.dim(i));
  }
  Reshape(dims);
}

template <typename Dtype>
int Blob<Dtype>::count(int start_axis, int end_axis) const {
  CHECK_LE(start_axis, end_axis);
  CHECK_GE(start_axis, 0);
  CHECK_LE(end_axis, num_axes());
  int c = 1;
  for (int i = start_axis; i < end_axis; ++i) c *= shape_[i];
  return c;
}

template <typename Dtype>
int Blob<Dtype>::CanonicalAxisIndex(int axis_index) const {
  STRATA_REQUIRE(axis_index >= -num_axes() && axis_index < std::max(num_axes(), 1))
      << "axis " << axis_index << " out of range for a " << num_axes() << "-D blob of shape "
      << shape_string();
  return axis_index < 0 ? axis_index + num_axes() : axis_index;
}

template <typename Dtype>
std::string Blob<Dtype>::shape_string() const {
  std::ostringstream s;
  for (int d : shape_) s << d << " ";
  s << "(" << count_ << ")";
  return s.str();
}

template <typename Dtype>
int Blob<Dtype>::LegacyShape(int index) const {
  CHECK_LE(num_axes(), 4) << "legacy accessors need a blob of at most 4 axes";
  if (index >= num_axes() || index < -num_axes()) return 1;
  return shape(index);
}

template <typename Dtype>
int Blob<Dtype>::offset(int n, int c, int h, int w) const {
  return ((n * channels() + c) * height() + h) * width() + w;
}

template <typename Dtype>
int Blob<Dtype>::offset(const std::vector<int>& indices) const {
  CHECK_LE(indices.size(), shape_.size());
  int off = 0;
  for (int i = 0; i < num_axes(); ++i) {
    off *= shape_[i];
    if (i < static_cast<int>(indices.size())) off += indices[i];
  }
  return off;
}

template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_data() const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->cpu_data());
}
template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_diff() const {
  CHECK(diff_);
  return static_cast<const Dtype*>(diff_->cpu_data());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_data() {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_cpu_data());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_diff() {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_cpu_data());
}
template <typename Dtype>
bool Blob<Dtype>::can_block() const {
  return num_axes() == 4 && count_ > 0 && shape_[1] % kChannelBlock16 == 0;
}

template <typename Dtype>
LayoutShape Blob<Dtype>::blocked_shape() const {
  CHECK(can_block()) << "a blob of shape " << shape_string() << " has no blocked layout";
  return {shape_[0], shape_[1], shape_[2] * shape_[3], static_cast<int>(sizeof(Dtype))};
}

template <typename Dtype>
MemoryFormat Blob<Dtype>::layout_of(const SyncedMemory& m) const {
  // Memory shared with a blob of another shape (Flatten, Reshape) is plain to this one.
  if (m.layout() != MemoryFormat::kBlocked16 || !can_block() || !(m.blocked_shape() == blocked_shape())) {
    return MemoryFormat::kPlain;
  }
  return MemoryFormat::kBlocked16;
}

template <typename Dtype>
MemoryFormat Blob<Dtype>::data_layout() const {
  return data_ ? layout_of(*data_) : MemoryFormat::kPlain;
}
template <typename Dtype>
MemoryFormat Blob<Dtype>::diff_layout() const {
  return diff_ ? layout_of(*diff_) : MemoryFormat::kPlain;
}

template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_data_in(MemoryFormat layout) const {
  CHECK(data_);
  if (layout == MemoryFormat::kPlain) return cpu_data();
  return static_cast<const Dtype*>(data_->cpu_data_in(layout, blocked_shape()));
}
template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_diff_in(MemoryFormat layout) const {
  CHECK(diff_);
  if (layout == MemoryFormat::kPlain) return cpu_diff();
  return static_cast<const Dtype*>(diff_->cpu_data_in(layout, blocked_shape()));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_data_in(MemoryFormat layout, bool keep_values) {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_cpu_data_in(
      layout, layout == MemoryFormat::kPlain ? LayoutShape{} : blocked_shape(), keep_values));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_diff_in(MemoryFormat layout, bool keep_values) {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_cpu_data_in(
      layout, layout == MemoryFormat::kPlain ? LayoutShape{} : blocked_shape(), keep_values));
}

template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_data_as(const CustomFormatPtr& layout) const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->cpu_data_as(layout));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_data_as(const CustomFormatPtr& layout, bool keep_values) {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_cpu_data_as(layout, keep_values));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_diff_as(const CustomFormatPtr& layout, bool keep_values) {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_cpu_data_as(layout, keep_values));
}
template <typename Dtype>
CustomFormatPtr Blob<Dtype>::data_custom_layout() const {
  return data_ && data_->layout() == MemoryFormat::kCustom ? data_->custom_layout() : nullptr;
}

namespace {
// Brings `m` into the layout `like` is in (plain unless `like` is custom: a parameter's value is plain or custom).
void align_memory(SyncedMemory& m, const SyncedMemory& like) {
  if (like.layout() == MemoryFormat::kCustom) {
    if (m.layout() != MemoryFormat::kCustom || !SameFormat(m.custom_layout().get(), like.custom_layout().get())) {
      m.cpu_data_as(like.custom_layout());
    }
  } else if (m.layout() != MemoryFormat::kPlain) {
    m.cpu_data();
  }
}
}  // namespace

template <typename Dtype>
void Blob<Dtype>::AlignDiffWithData() {
  if (data_ && diff_ && data_ != diff_) align_memory(*diff_, *data_);
}
template <typename Dtype>
void Blob<Dtype>::AlignWithData(Blob& other) const {
  CHECK_EQ(other.count(), count_) << "aligning blobs of different sizes";
  if (data_ && other.data_ && other.data_ != data_) align_memory(*other.data_, *data_);
}
template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_data_as_is() const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->cpu_data_as_is());
}
template <typename Dtype>
const Dtype* Blob<Dtype>::cpu_diff_as_is() const {
  CHECK(diff_);
  return static_cast<const Dtype*>(diff_->cpu_data_as_is());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_data_as_is() {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_cpu_data_as_is());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_cpu_diff_as_is() {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_cpu_data_as_is());
}

template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_data() const {
  CHECK(data_);
  return static_cast<const Dtype*>(data_->gpu_data());
}
template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_diff() const {
  CHECK(diff_);
  return static_cast<const Dtype*>(diff_->gpu_data());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_data() {
  CHECK(data_);
  return static_cast<Dtype*>(data_->mutable_gpu_data());
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_diff() {
  CHECK(diff_);
  return static_cast<Dtype*>(diff_->mutable_gpu_data());
}

namespace {
template <typename Dtype>
SyncedMemory& memory_16bit(const std::shared_ptr<SyncedMemory>& m, DeviceFormat format) {
  CHECK(m);
  CHECK(is_16bit(format)) << "a 16-bit device access asked for " << format_name(format);
  CHECK((std::is_same<Dtype, float>::value)) << "only a float blob is held in " << format_name(format);
  return *m;
}
}  // namespace

template <typename Dtype>
LayoutShape Blob<Dtype>::device_shape(DeviceFormat format) const {
  if (!is_channels_last(format)) return {};
  CHECK(can_channels_last()) << "a blob of shape " << shape_string() << " has no channels-last layout";
  return {shape_[0], shape_[1], shape_[2] * shape_[3],
          static_cast<int>(is_16bit(format) ? sizeof(uint16_t) : sizeof(Dtype))};
}
template <typename Dtype>
DeviceFormat Blob<Dtype>::device_format_of(const SyncedMemory& m) const {
  const DeviceFormat f = m.device_format();
  if (is_channels_last(f) && !(can_channels_last() && m.device_shape() == device_shape(f))) {
    return device_format_for(element_type_of(f), /*channels_last=*/false);
  }
  return f;
}
template <typename Dtype>
DeviceFormat Blob<Dtype>::data_device_format() const {
  return data_ ? device_format_of(*data_) : DeviceFormat::kPlain;
}
template <typename Dtype>
DeviceFormat Blob<Dtype>::diff_device_format() const {
  return diff_ ? device_format_of(*diff_) : DeviceFormat::kPlain;
}

template <typename Dtype>
const void* Blob<Dtype>::gpu_data_16bit(DeviceFormat format) const {
  return memory_16bit<Dtype>(data_, format).gpu_data_in(format, device_shape(format));
}
template <typename Dtype>
const void* Blob<Dtype>::gpu_diff_16bit(DeviceFormat format) const {
  return memory_16bit<Dtype>(diff_, format).gpu_data_in(format, device_shape(format));
}
template <typename Dtype>
void* Blob<Dtype>::mutable_gpu_data_16bit(DeviceFormat format, bool keep_values) {
  return memory_16bit<Dtype>(data_, format).mutable_gpu_data_in(format, keep_values, device_shape(format));
}
template <typename Dtype>
void* Blob<Dtype>::mutable_gpu_diff_16bit(DeviceFormat format, bool keep_values) {
  return memory_16bit<Dtype>(diff_, format).mutable_gpu_data_in(format, keep_values, device_shape(format));
}

namespace {
// The memory of a device access in the blob's own type, in `format`.
template <typename Dtype>
SyncedMemory& own_type_memory(const std::shared_ptr<SyncedMemory>& m, DeviceFormat format) {
  CHECK(m);
  CHECK(!is_16bit(format)) << "a device access in the blob's own type asked for " << format_name(format);
  CHECK(format == DeviceFormat::kPlain || (std::is_same<Dtype, float>::value))
      << "only a float blob is held channels-last";
  return *m;
}
}  // namespace

template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_data_in(DeviceFormat format) const {
  return static_cast<const Dtype*>(own_type_memory<Dtype>(data_, format).gpu_data_in(format, device_shape(format)));
}
template <typename Dtype>
const Dtype* Blob<Dtype>::gpu_diff_in(DeviceFormat format) const {
  return static_cast<const Dtype*>(own_type_memory<Dtype>(diff_, format).gpu_data_in(format, device_shape(format)));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_data_in(DeviceFormat format, bool keep_values) {
  return static_cast<Dtype*>(
      own_type_memory<Dtype>(data_, format).mutable_gpu_data_in(format, keep_values, device_shape(format)));
}
template <typename Dtype>
Dtype* Blob<Dtype>::mutable_gpu_diff_in(DeviceFormat format, bool keep_values) {
  return static_cast<Dtype*>(
      own_type_memory<Dtype>(diff_, format).mutable_gpu_data_in(format, keep_values, device_shape(format)));
}

template <typename Dtype>
void Blob<Dtype>::set_cpu_data(Dtype* data) {
  CHECK(data);
  // Sharing another buffer: make sure our diff does not alias a buffer that was sized for a smaller blob.
  const size_t size = count_ * sizeof(Dtype);
  if (data_->size() != size) {
    data_ = std::make_shared<SyncedMemory>(size, category_);
    diff_ = std::make_shared<SyncedMemory>(size, category_);
  }
  data_->set_cpu_data(data);
}

#ifdef STRATA_USE_CUDA
namespace {
// Whole-blob arithmetic runs where the memory's freshest copy is, so a GPU-resident parameter is never copied to
// the host just to be scaled or updated (Caffe's rule).
bool on_gpu(const std::shared_ptr<SyncedMemory>& m) {
  return m->head() == SyncedMemory::HEAD_AT_GPU || m->head() == SyncedMemory::SYNCED;
}
}  // namespace
#endif

template <typename Dtype>
void Blob<Dtype>::Update() {
#ifdef STRATA_USE_CUDA
  if (count_ && on_gpu(data_) && Strata::mode() == Strata::GPU) {
    gpu_axpy<Dtype>(count_, Dtype(-1), gpu_diff(), mutable_gpu_data());
    return;
  }
#endif
  // Elementwise: in whatever layout the value is (a layer's CustomFormat), with the gradient brought into it.
  AlignDiffWithData();
  cpu_axpy<Dtype>(count_, Dtype(-1), cpu_diff_as_is(), mutable_cpu_data_as_is());
}

template <typename Dtype>
Dtype Blob<Dtype>::asum_data() const {
  if (!count_) return Dtype(0);
#ifdef STRATA_USE_CUDA
  if (data_->head() == SyncedMemory::HEAD_AT_GPU) return gpu_asum(count_, gpu_data());
#endif
  return cpu_asum(count_, cpu_data_as_is());  // the same in every layout
}
template <typename Dtype>
Dtype Blob<Dtype>::asum_diff() const {
  if (!count_) return Dtype(0);
#ifdef STRATA_USE_CUDA
  if (diff_->head() == SyncedMemory::HEAD_AT_GPU) return gpu_asum(count_, gpu_diff());
#endif
  return cpu_asum(count_, cpu_diff_as_is());
}
template <typename Dtype>
Dtype Blob<Dtype>::sumsq_data() const {
  if (!count_) return Dtype(0);
#ifdef STRATA_USE_CUDA
  if (data_->head() == SyncedMemory::HEAD_AT_GPU) return gpu_dot(count_, gpu_data(), gpu_data());
#endif
  return cpu_dot(count_, cpu_data_as_is(), cpu_data_as_is());
}
template <typename Dtype>
Dtype Blob<Dtype>::sumsq_diff() const {
  if (!count_) return Dtype(0);
#ifdef STRATA_USE_CUDA
  if (diff_->head() == SyncedMemory::HEAD_AT_GPU) return gpu_dot(count_, gpu_diff(), gpu_diff());
#endif
  return cpu_dot(count_, cpu_diff_as_is(), cpu_diff_as_is());
}
template <typename Dtype>
void Blob<Dtype>::scale_data(Dtype factor) {
  if (!count_) return;
#ifdef STRATA_USE_CUDA
  if (on_gpu(data_) && Strata::mode() == Strata::GPU) return gpu_scal(count_, factor, mutable_gpu_data());
#endif
  cpu_scal(count_, factor, mutable_cpu_data_as_is());
}
template <typename Dtype>
void Blob<Dtype>::scale_diff(Dtype factor) {
  if (!count_) return;
#ifdef STRATA_USE_CUDA
  if (on_gpu(diff_) && Strata::mode() == Strata::GPU) return gpu_scal(count_, factor, mutable_gpu_diff());
#endif
  cpu_scal(count_, factor, mutable_cpu_diff_as_is());
}

template <typename Dtype>
void Blob<Dtype>::clear_diff() {
  if (!count_) return;
#ifdef STRATA_USE_CUDA
  if (Strata::mode() == Strata::GPU) return gpu_set(count_, Dtype(0), mutable_gpu_diff());
#endif
  cpu_set(count_, Dtype(0), mutable_cpu_diff_as_is());  // zeros in whatever layout: it stays
}

template <typename Dtype>
void Blob<Dtype>::ShareData(const Blob& other) {
  CHECK_EQ(count_, other.count());
  data_ = other.data();
}
template <typename Dtype>
void Blob<Dtype>::ShareDiff(const Blob& other) {
  CHECK_EQ(count_, other.count());
  diff_ = other.diff();
}

template <typename Dtype>
void Blob<Dtype>::CopyFrom(const Blob& source, bool copy_diff, bool reshape) {
  if (source.count() != count_ || source.shape() != shape_) {
    STRATA_REQUIRE(reshape) << "copying a blob of shape " << source.shape_string() << " into one of shape "
                            << shape_string();
    ReshapeLike(source);
  }
  if (count_ == 0) return;
#ifdef STRATA_USE_CUDA
  // In GPU mode on the device, as Caffe's: values held there stay there (a replayed forward saves and restores
  // BatchNorm's statistics this way, every pass of every reversible block).
  if (Strata::mode() == Strata::GPU) {
    if (copy_diff) {
      gpu_copy(count_, source.gpu_diff(), mutable_gpu_diff());
    } else {
      gpu_copy(count_, source.gpu_data(), mutable_gpu_data());
    }
    return;
  }
#endif
  if (copy_diff) {
    std::memcpy(mutable_cpu_diff(), source.cpu_diff(), sizeof(Dtype) * count_);
  } else {
    std::memcpy(mutable_cpu_data(), source.cpu_data(), sizeof(Dtype) * count_);
  }
}

namespace {
std::vector<int> proto_shape(const BlobProto& proto) {
  std::vector<int> shape;
  if (proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width()) {
    shape = {proto.num(), proto.channels(), proto.height(), proto.width()};
  } else {
    for (int i = 0; i < proto.shape().dim_size(); ++i) shape.push_back(static_cast<int>(proto.shape().dim(i)));
  }
  return shape;
}

// Caffe wrote fully-connected weights as 4-D (1, 1, out, in); treat leading 1-axes as equal.
bool same_shape_modulo_leading_ones(std::vector<int> a, std::vector<int> b) {
  auto strip = [](std::vector<int>& v) {
    size_t i = 0;
    while (i + 1 < v.size() && v[i] == 1) ++i;
    v.erase(v.begin(), v.begin() + i);
  };
  strip(a);
  strip(b);
  return a == b;
}
}  // namespace

template <typename Dtype>
bool Blob<Dtype>::ShapeEquals(const BlobProto& other) const {
  return same_shape_modulo_leading_ones(proto_shape(other), shape_);
}

template <typename Dtype>
void Blob<Dtype>::FromProto(const BlobProto& proto, bool reshape) {
  const std::vector<int> shape = proto_shape(proto);
  if (reshape) {
    Reshape(shape);
  } else {
    STRATA_REQUIRE(ShapeEquals(proto)) << "shape mismatch: stored blob has shape " << [&] {
      std::ostringstream s;
      for (int d : shape) s << d << " ";
      return s.str();
    }() << "but the net expects " << shape_string();
  }
  Dtype* data = count_ ? mutable_cpu_data() : nullptr;
  if (proto.double_data_size() > 0) {
    STRATA_REQUIRE(proto.double_data_size() == count_)
        << "blob holds " << proto.double_data_size() << " values, its shape needs " << count_;
    for (int i = 0; i < count_; ++i) data[i] = static_cast<Dtype>(proto.double_data(i));
  } else {
    STRATA_REQUIRE(proto.data_size() == count_)
        << "blob holds " << proto.data_size() << " values, its shape needs " << count_;
    for (int i = 0; i < count_; ++i) data[i] = static_cast<Dtype>(proto.data(i));
  }
  if (proto.double_diff_size() > 0) {
    STRATA_REQUIRE(proto.double_diff_size() == count_) << "blob diff size mismatch";
    Dtype* diff = mutable_cpu_diff();
    for (int i = 0; i < count_; ++i) diff[i] = static_cast<Dtype>(proto.double_diff(i));
  } else if (proto.diff_size() > 0) {
    STRATA_REQUIRE(proto.diff_size() == count_) << "blob diff size mismatch";
    Dtype* diff = mutable_cpu_diff();
    for (int i = 0; i < count_; ++i) diff[i] = static_cast<Dtype>(proto.diff(i));
  }
}

template <typename Dtype>
void Blob<Dtype>::ToProto(BlobProto* proto, bool write_diff) const {
  proto->Clear();
  for (int d : shape_) proto->mutable_shape()->add_dim(d);
  if (count_ == 0) return;
  const Dtype* data = cpu_data();
  if (sizeof(Dtype) == sizeof(double)) {
    proto->mutable_double_data()->Reserve(count_);
    for (int i = 0; i < count_; ++i) proto->add_double_data(data[i]);
  } else {
    proto->mutable_data()->Resize(count_, 0.f);
    for (int i = 0; i < count_; ++i) proto->set_data(i, static_cast<float>(data[i]));
  }
  if (write_diff) {
    const Dtype* diff = cpu_diff();
    if (sizeof(Dtype) == sizeof(double)) {
      for (int i = 0; i < count_; ++i) proto->add_double_diff(diff[i]);
    } else {
      proto->mutable_diff()->Resize(count_, 0.f);
      for (int i = 0; i < count_; ++i) proto->set_diff(i, static_cast<float>(diff[i]));
    }
  }
}

template <typename Dtype>
void Blob<Dtype>::set_memory_category(MemoryCategory c) {
  category_ = c;
  for (auto* mem : {data_.get(), diff_.get()}) {
    if (mem) mem->set_category(c);
  }
}

template <typename Dtype>
void Blob<Dtype>::release_memory() {
  if (data_) data_->release();
  if (diff_) diff_->release();
}

template <typename Dtype>
bool Blob<Dtype>::has_data() const {
  return data_ && data_->head() != SyncedMemory::UNINITIALIZED;
}

template <typename Dtype>
size_t Blob<Dtype>::resident_bytes() const {
  size_t b = 0;
  if (data_) b += data_->resident_bytes();
  if (diff_ && diff_ != data_) b += diff_->resident_bytes();
  return b;
}

STRATA_INSTANTIATE_CLASS(Blob);

}  // namespace strata
