// Image decoding and encoding live in a module of their own, libstrata_image_codecs.so, which links OpenCV's
// imgcodecs and is loaded on first use. imgcodecs brings 80-odd libraries with it on Debian (GDAL, Poppler, x265,
// GnuTLS, ...): a large part of every process's resident memory and a slower start, paid by every run that never
// reads an encoded image (docs/benchmarks.md, "LeNet training's memory", has the figures). Only ImageData, an encoded Datum and
// convert_imageset load it.
//
// The table below is the module's whole interface. Both sides are built from this header by one build, so C++
// types cross it; `abi` guards against a stale module beside a newer libstrata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::image_codecs {

// An 8-bit image as OpenCV holds it: rows of interleaved channels (HWC; colour in BGR order).
struct Image {
  int channels = 0, height = 0, width = 0;
  std::vector<uint8_t> hwc;
};

// How to decode: as stored, forced to 3-channel BGR, or forced to one gray channel.
enum class Decode { kUnchanged = 0, kColor = 1, kGray = 2 };

// Every entry returns "" on success, else why it failed (the caller adds what it was reading).
struct Table {
  int abi;
  std::string (*decode)(std::string_view bytes, Decode mode, Image* out);
  // An image file, decoded as colour or gray, resized to height x width when both are positive.
  std::string (*read)(const std::string& filename, bool color, int height, int width, Image* out);
  // `ext` is a file extension without the dot ("png", "jpg").
  std::string (*encode)(const Image& image, const std::string& ext, std::string* bytes);
};

constexpr int kAbi = 1;
// The symbol the module exports (extern "C", returning const Table*).
constexpr const char* kEntryPoint = "strata_image_codecs_table";
constexpr const char* kModuleName = "libstrata_image_codecs.so";

// True when this build made the module (OpenCV was found).
bool Built();
// The module's table, loaded once (thread-safe); throws an Error saying why when it cannot be loaded.
const Table& Get();

}  // namespace strata::image_codecs
