#include "strata/data/datum.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "strata/common.hpp"

#ifdef STRATA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace strata {

bool HaveImageCodecs() {
#ifdef STRATA_USE_OPENCV
  return true;
#else
  return false;
#endif
}

bool ParseDatum(std::string_view bytes, Datum* datum) {
  return datum->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

#ifdef STRATA_USE_OPENCV
namespace {

// OpenCV keeps pixels interleaved (HWC, BGR); Datums and blobs are planar (CHW).
void MatToChw(const cv::Mat& img, uint8_t* out) {
  const int c = img.channels(), h = img.rows, w = img.cols;
  const size_t plane = static_cast<size_t>(h) * w;
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = img.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) out[k * plane + static_cast<size_t>(y) * w + x] = row[x * c + k];
  }
}

}  // namespace
#endif

void DatumPixels::Load(const Datum& datum, ColorMode mode) {
  bytes_ = nullptr;
  floats_ = nullptr;
  if (datum.encoded()) {
#ifdef STRATA_USE_OPENCV
    const std::string& data = datum.data();
    STRATA_REQUIRE(!data.empty()) << "the Datum is marked encoded but holds no image bytes";
    const int flags = mode == ColorMode::kColor  ? cv::IMREAD_COLOR
                      : mode == ColorMode::kGray ? cv::IMREAD_GRAYSCALE
                                                 : cv::IMREAD_UNCHANGED;
    const cv::Mat raw(1, static_cast<int>(data.size()), CV_8UC1, const_cast<char*>(data.data()));
    cv::Mat img;
    try {
      img = cv::imdecode(raw, flags);
    } catch (const cv::Exception& e) {
      STRATA_FAIL() << "cannot decode the encoded image: " << e.what();
    }
    STRATA_REQUIRE(!img.empty()) << "cannot decode the encoded image (" << data.size()
                                 << " bytes; not an image format OpenCV reads)";
    STRATA_REQUIRE(img.depth() == CV_8U) << "the encoded image has " << img.elemSize1() * 8
                                         << "-bit samples; only 8-bit images are supported";
    channels_ = img.channels();
    height_ = img.rows;
    width_ = img.cols;
    decoded_.resize(static_cast<size_t>(count()));
    MatToChw(img, decoded_.data());
    bytes_ = decoded_.data();
    return;
#else
    (void)mode;
    STRATA_FAIL() << "the Datum holds an encoded image, but Strata was built without OpenCV to decode it "
                     "(install libopencv-imgcodecs-dev and rebuild)";
#endif
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

#ifdef STRATA_USE_OPENCV
namespace {

std::string lower_extension(const std::string& filename) {
  const size_t dot = filename.rfind('.');
  if (dot == std::string::npos || filename.find('/', dot) != std::string::npos) return "";
  std::string ext = filename.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

}  // namespace
#endif

bool ReadImageToDatum(const std::string& filename, int label, int height, int width, bool is_color,
                      const std::string& encoding, Datum* datum) {
#ifdef STRATA_USE_OPENCV
  cv::Mat img = cv::imread(filename, is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  if (img.empty()) {
    LOG(ERROR) << "cannot read '" << filename << "' as an image";
    return false;
  }
  const bool resize = height > 0 && width > 0;
  if (resize) {
    cv::Mat resized;
    cv::resize(img, resized, cv::Size(width, height));
    img = resized;
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
      if (!in.bad() && !bytes.empty() && (img.channels() == 3) == is_color) {
        datum->set_data(std::move(bytes));
        datum->set_encoded(true);
        return true;
      }
    }
    std::vector<uchar> buf;
    bool ok = false;
    try {
      ok = cv::imencode("." + ext, img, buf);
    } catch (const cv::Exception& e) {
      ok = false;
    }
    STRATA_REQUIRE(ok) << "cannot encode '" << filename << "' as '" << ext << "'";
    datum->set_data(std::string(buf.begin(), buf.end()));
    datum->set_encoded(true);
    return true;
  }
  datum->set_channels(img.channels());
  datum->set_height(img.rows);
  datum->set_width(img.cols);
  std::string* data = datum->mutable_data();
  data->resize(static_cast<size_t>(img.channels()) * img.rows * img.cols);
  MatToChw(img, reinterpret_cast<uint8_t*>(&(*data)[0]));
  return true;
#else
  (void)filename, (void)label, (void)height, (void)width, (void)is_color, (void)encoding, (void)datum;
  STRATA_FAIL() << "reading images needs OpenCV, and Strata was built without it "
                   "(install libopencv-imgcodecs-dev and rebuild)";
  return false;
#endif
}

}  // namespace strata
