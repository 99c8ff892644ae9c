// Datum records (Caffe's layout, proto/strata.proto): the pixels of one example as raw uint8 bytes (CHW),
// as float_data, or as an encoded image file (encoded = true, decoded with OpenCV), plus its label.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/proto/strata.pb.h"

namespace strata {

// How an encoded image is decoded: as stored (OpenCV's IMREAD_UNCHANGED), forced to 3-channel BGR, or
// forced to one gray channel (transform_param's force_color / force_gray).
enum class ColorMode { kNative, kColor, kGray };

// True when OpenCV was found at build time, so encoded images can be decoded and written.
bool HaveImageCodecs();

// Parses a serialized Datum; false when the bytes are not one. Reuses `datum`'s storage.
bool ParseDatum(std::string_view bytes, Datum* datum);

// The pixels of one Datum in CHW order, as a view: raw bytes and float_data point into the Datum itself (no
// copy); an encoded image is decoded into a buffer this object owns and reuses from record to record.
// Load() throws an Error (without location: the caller knows the record) when the sizes disagree or the
// image cannot be decoded.
class DatumPixels {
 public:
  void Load(const Datum& datum, ColorMode mode = ColorMode::kNative);

  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }
  int count() const { return channels_ * height_ * width_; }
  // Exactly one of these is non-null after Load.
  const uint8_t* bytes() const { return bytes_; }
  const float* floats() const { return floats_; }

 private:
  int channels_ = 0, height_ = 0, width_ = 0;
  const uint8_t* bytes_ = nullptr;
  const float* floats_ = nullptr;
  std::vector<uint8_t> decoded_;
};

// Reads an image file into a Datum the way Caffe's convert_imageset does: decoded as color (BGR) or gray,
// resized to height x width when both are positive, stored as raw CHW bytes, or, when `encoding` is given
// ("png", "jpg", ...), stored encoded: the file's own bytes when nothing would change, else re-encoded.
// Returns false when the file cannot be read as an image, with the reason in *why (logged when why is null);
// Error when built without OpenCV.
bool ReadImageToDatum(const std::string& filename, int label, int height, int width, bool is_color,
                      const std::string& encoding, Datum* datum, std::string* why = nullptr);

}  // namespace strata
