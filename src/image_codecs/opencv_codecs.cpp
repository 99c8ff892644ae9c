// libstrata_image_codecs.so: Strata's image decoding and encoding on OpenCV (src/strata/data/image_codecs.hpp says
// why this is a module of its own). Never throws across the module boundary: failures come back as text.
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "strata/data/image_codecs.hpp"

namespace strata::image_codecs {
namespace {

std::string FromMat(const cv::Mat& img, Image* out) {
  if (img.empty()) return "not an image format OpenCV reads";
  if (img.depth() != CV_8U)
    return "it has " + std::to_string(img.elemSize1() * 8) + "-bit samples; only 8-bit images are supported";
  out->channels = img.channels();
  out->height = img.rows;
  out->width = img.cols;
  const size_t row = static_cast<size_t>(img.cols) * img.channels();
  out->hwc.resize(row * img.rows);
  for (int y = 0; y < img.rows; ++y) std::copy_n(img.ptr<uint8_t>(y), row, out->hwc.data() + row * y);
  return "";
}

std::string DecodeBytes(std::string_view bytes, Decode mode, Image* out) {
  const int flags = mode == Decode::kColor  ? cv::IMREAD_COLOR
                    : mode == Decode::kGray ? cv::IMREAD_GRAYSCALE
                                            : cv::IMREAD_UNCHANGED;
  try {
    const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    return FromMat(cv::imdecode(raw, flags), out);
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string ReadFile(const std::string& filename, bool color, int height, int width, Image* out) {
  try {
    cv::Mat img = cv::imread(filename, color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
    if (!img.empty() && height > 0 && width > 0) {
      cv::Mat resized;
      cv::resize(img, resized, cv::Size(width, height));
      img = resized;
    }
    return FromMat(img, out);
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string EncodeImage(const Image& image, const std::string& ext, std::string* bytes) {
  try {
    const cv::Mat img(image.height, image.width, CV_8UC(image.channels), const_cast<uint8_t*>(image.hwc.data()));
    std::vector<uchar> buf;
    if (!cv::imencode("." + ext, img, buf)) return "OpenCV cannot write '" + ext + "'";
    bytes->assign(buf.begin(), buf.end());
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

const Table kTable{kAbi, DecodeBytes, ReadFile, EncodeImage};

}  // namespace
}  // namespace strata::image_codecs

extern "C" __attribute__((visibility("default"))) const strata::image_codecs::Table* strata_image_codecs_table() {
  return &strata::image_codecs::kTable;
}
