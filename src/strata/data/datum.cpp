#include "strata/data/datum.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "strata/common.hpp"
#include "strata/data/image_codecs.hpp"

namespace strata {

bool HaveImageCodecs() { return image_codecs::Built(); }

bool ParseDatum(std::string_view bytes, Datum* datum) {
  return datum->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

namespace {

// OpenCV keeps pixels interleaved (HWC, BGR); Datums and blobs are planar (CHW).
void HwcToChw(const image_codecs::Image& img, uint8_t* out) {
  const int c = img.channels, h = img.height, w = img.width;
  const size_t plane = static_cast<size_t>(h) * w;
  for (size_t p = 0; p < plane; ++p)
    for (int k = 0; k < c; ++k) out[k * plane + p] = img.hwc[p * c + k];
}

}  // namespace

void DatumPixels::Load(const Datum& datum, ColorMode mode) {
  bytes_ = nullptr;
  floats_ = nullptr;
  if (datum.encoded()) {
    const std::string& data = datum.data();
    STRATA_REQUIRE(!data.empty()) << "the Datum is marked encoded but holds no image bytes";
    const auto decode = mode == ColorMode::kColor  ? image_codecs::Decode::kColor
                        : mode == ColorMode::kGray ? image_codecs::Decode::kGray
                                                   : image_codecs::Decode::kUnchanged;
    image_codecs::Image image;
    const std::string error = image_codecs::Get().decode(data, decode, &image);
    STRATA_REQUIRE(error.empty()) << "cannot decode the encoded image (" << data.size() << " bytes): " << error;
    channels_ = image.channels;
    height_ = image.height;
    width_ = image.width;
    decoded_.resize(static_cast<size_t>(count()));
    HwcToChw(image, decoded_.data());
    bytes_ = decoded_.data();
    return;
  }
  channels_ = datum.channels();
  height_ = datum.height();
  width_ = datum.width();
  STRATA_REQUIRE(channels_ > 0 && height_ > 0 && width_ > 0)
      << "the Datum has shape " << channels_ << " x " << height_ << " x " << width_
      << "; channels, height and width must be positive";
  // In two steps: the product of three ints can pass even int64 (2^29 x 36 x 2^30 did).
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  STRATA_REQUIRE(plane <= INT32_MAX && plane * channels_ <= INT32_MAX)
      << "the Datum's shape " << channels_ << " x " << height_ << " x " << width_ << " is too large";
  const int64_t expected = plane * channels_;
  if (!datum.data().empty()) {
    STRATA_REQUIRE(static_cast<int64_t>(datum.data().size()) == expected)
        << "the Datum holds " << datum.data().size() << " bytes of pixels but its shape " << channels_ << " x "
        << height_ << " x " << width_ << " needs " << expected;
    bytes_ = reinterpret_cast<const uint8_t*>(datum.data().data());
  } else {
    STRATA_REQUIRE(datum.float_data_size() == expected)
        << "the Datum holds " << datum.float_data_size() << " float_data values (and no bytes) but its shape "
        << channels_ << " x " << height_ << " x " << width_ << " needs " << expected;
    floats_ = datum.float_data().data();
  }
}

namespace {

std::string lower_extension(const std::string& filename) {
  const size_t dot = filename.rfind('.');
  if (dot == std::string::npos || filename.find('/', dot) != std::string::npos) return "";
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

}  // namespace

bool ReadImageToDatum(const std::string& filename, int label, int height, int width, bool is_color,
                      const std::string& encoding, Datum* datum, std::string* why) {
  image_codecs::Image img;
  const std::string error = image_codecs::Get().read(filename, is_color, height, width, &img);
  if (!error.empty()) {
    if (why) {
      *why = error;
    } else {
      LOG(ERROR) << "cannot read '" << filename << "' as an image: " << error;
    }
    return false;
  }
  datum->Clear();
  datum->set_label(label);
  if (!encoding.empty()) {
    std::string ext = encoding;
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (height == 0 && width == 0 && lower_extension(filename) == ext) {
      // Nothing to change: keep the file's own bytes (as Caffe does), no lossy re-encoding.
      std::ifstream in(filename, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.bad() && !bytes.empty() && (img.channels == 3) == is_color) {
        datum->set_data(std::move(bytes));
        datum->set_encoded(true);
        return true;
      }
    }
    const std::string failed = image_codecs::Get().encode(img, ext, datum->mutable_data());
    STRATA_REQUIRE(failed.empty()) << "cannot encode '" << filename << "' as '" << ext << "': " << failed;
    datum->set_encoded(true);
    return true;
  }
  datum->set_channels(img.channels);
  datum->set_height(img.height);
  datum->set_width(img.width);
  std::string* data = datum->mutable_data();
  data->resize(static_cast<size_t>(img.channels) * img.height * img.width);
  HwcToChw(img, reinterpret_cast<uint8_t*>(&(*data)[0]));
  return true;
}

}  // namespace strata
