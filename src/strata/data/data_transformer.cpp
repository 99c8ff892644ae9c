#include "strata/data/data_transformer.hpp"

#include <algorithm>
#include <sstream>

#include "strata/common.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

std::string shape_text(int c, int h, int w) {
  std::ostringstream s;
  s << c << " x " << h << " x " << w;
  return s.str();
}

// One row of output: (in - mean) * scale, with the mean per pixel (mean file) or constant (mean_value or
// none). Separate loops for mirrored and plain rows keep the branch out of the pixel loop, so the compiler
// vectorises the uint8 -> float conversion.
template <typename Src, typename Dtype>
inline void row_const_mean(const Src* src, int n, Dtype mean, Dtype scale, bool mirror, Dtype* dst) {
  if (mirror) {
    for (int x = 0; x < n; ++x) dst[n - 1 - x] = (static_cast<Dtype>(src[x]) - mean) * scale;
  } else {
    for (int x = 0; x < n; ++x) dst[x] = (static_cast<Dtype>(src[x]) - mean) * scale;
  }
}

template <typename Src, typename Dtype>
inline void row_mean_file(const Src* src, const Dtype* mean, int n, Dtype scale, bool mirror, Dtype* dst) {
  if (mirror) {
    for (int x = 0; x < n; ++x) dst[n - 1 - x] = (static_cast<Dtype>(src[x]) - mean[x]) * scale;
  } else {
    for (int x = 0; x < n; ++x) dst[x] = (static_cast<Dtype>(src[x]) - mean[x]) * scale;
  }
}

}  // namespace

template <typename Dtype>
DataTransformer<Dtype>::DataTransformer(const TransformationParameter& param, Phase phase, uint64_t seed)
    : param_(param), phase_(phase), scale_(static_cast<Dtype>(param.scale())), rng_state_(seed) {
  // As in Caffe, force_color wins when both are set.
  color_mode_ = param.force_color() ? ColorMode::kColor : param.force_gray() ? ColorMode::kGray : ColorMode::kNative;
  STRATA_REQUIRE(!(param.has_mean_file() && param.mean_value_size() > 0))
      << "transform_param: give mean_file or mean_value, not both";
  for (float v : param.mean_value()) mean_values_.push_back(static_cast<Dtype>(v));
  if (param.has_mean_file()) {
    const std::string& file = param.mean_file();
    BlobProto proto;
    ReadProtoFromBinaryFile(file, &proto);
    std::vector<int64_t> dims;
    if (proto.has_shape()) {
      for (int64_t d : proto.shape().dim()) dims.push_back(d);
    } else {
      dims = {proto.num(), proto.channels(), proto.height(), proto.width()};
    }
    // Caffe writes 1 x C x H x W; a plain C x H x W is read the same way.
    if (dims.size() == 4 && dims[0] == 1) dims.erase(dims.begin());
    std::ostringstream shape;
    for (size_t i = 0; i < dims.size(); ++i) shape << (i ? " x " : "") << dims[i];
    STRATA_REQUIRE(dims.size() == 3 && dims[0] > 0 && dims[1] > 0 && dims[2] > 0)
        << "mean file '" << file << "' has shape " << shape.str() << "; expected 1 x C x H x W";
    mean_channels_ = static_cast<int>(dims[0]);
    mean_height_ = static_cast<int>(dims[1]);
    mean_width_ = static_cast<int>(dims[2]);
    const int64_t count = dims[0] * dims[1] * dims[2];
    if (proto.double_data_size() > 0) {
      STRATA_REQUIRE(proto.double_data_size() == count)
          << "mean file '" << file << "' holds " << proto.double_data_size() << " values but its shape "
          << shape.str() << " needs " << count;
      mean_file_.assign(proto.double_data().begin(), proto.double_data().end());
    } else {
      STRATA_REQUIRE(proto.data_size() == count) << "mean file '" << file << "' holds " << proto.data_size()
                                                 << " values but its shape " << shape.str() << " needs " << count;
      mean_file_.assign(proto.data().begin(), proto.data().end());
    }
  }
}

template <typename Dtype>
std::vector<int> DataTransformer<Dtype>::OutputShape(int channels, int height, int width) const {
  if (!mean_file_.empty()) {
    STRATA_REQUIRE(channels == mean_channels_ && height == mean_height_ && width == mean_width_)
        << "mean file '" << param_.mean_file() << "' has shape "
        << shape_text(mean_channels_, mean_height_, mean_width_) << " but the data is "
        << shape_text(channels, height, width) << " (the mean must have the data's uncropped shape)";
  }
  STRATA_REQUIRE(mean_values_.size() <= 1 || static_cast<int>(mean_values_.size()) == channels)
      << "transform_param has " << mean_values_.size() << " mean_value entries for data with " << channels
      << " channels; give one, or one per channel";
  // crop_size is a uint32: compared as it is, since above INT_MAX it would turn negative as an int.
  const uint32_t crop = param_.crop_size();
  STRATA_REQUIRE(int64_t(crop) <= height && int64_t(crop) <= width)
      << "crop_size " << crop << " is larger than the data (" << shape_text(channels, height, width) << ")";
  return {channels, crop ? static_cast<int>(crop) : height, crop ? static_cast<int>(crop) : width};
}

template <typename Dtype>
uint64_t DataTransformer<Dtype>::NextRandom() {
  // splitmix64: good enough for crop offsets and coin flips, and seeding is free.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename Dtype>
template <typename Src>
void DataTransformer<Dtype>::TransformPlanes(const Src* in, int channels, int height, int width, Dtype* out) {
  const bool mean_file_shape_ok =
      mean_file_.empty() || (channels == mean_channels_ && height == mean_height_ && width == mean_width_);
  if (!mean_file_shape_ok || int64_t(param_.crop_size()) > std::min(height, width) ||
      (mean_values_.size() > 1 && static_cast<int>(mean_values_.size()) != channels)) {
    OutputShape(channels, height, width);  // throws the precise message
  }
  const int crop = static_cast<int>(param_.crop_size());  // at most height and width now
  const bool train = phase_ == TRAIN;
  const bool mirror = param_.mirror() && train && Rand(2) == 1;
  int h_off = 0, w_off = 0, out_h = height, out_w = width;
  if (crop) {
    out_h = out_w = crop;
    if (train) {
      h_off = Rand(height - crop + 1);
      w_off = Rand(width - crop + 1);
    } else {
      h_off = (height - crop) / 2;
      w_off = (width - crop) / 2;
    }
  }
  for (int c = 0; c < channels; ++c) {
    const Dtype mean = mean_values_.empty() ? Dtype(0) : mean_values_[mean_values_.size() == 1 ? 0 : c];
    for (int y = 0; y < out_h; ++y) {
      const size_t in_offset = (static_cast<size_t>(c) * height + h_off + y) * width + w_off;
      Dtype* dst = out + (static_cast<size_t>(c) * out_h + y) * out_w;
      if (mean_file_.empty()) {
        row_const_mean(in + in_offset, out_w, mean, scale_, mirror, dst);
      } else {
        row_mean_file(in + in_offset, mean_file_.data() + in_offset, out_w, scale_, mirror, dst);
      }
    }
  }
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const DatumPixels& pixels, Dtype* out) {
  if (pixels.bytes()) {
    TransformPlanes(pixels.bytes(), pixels.channels(), pixels.height(), pixels.width(), out);
  } else {
    TransformPlanes(pixels.floats(), pixels.channels(), pixels.height(), pixels.width(), out);
  }
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const Datum& datum, Dtype* out) {
  pixels_.Load(datum, color_mode_);
  Transform(pixels_, out);
}

STRATA_INSTANTIATE_CLASS(DataTransformer);

}  // namespace strata
