// The work behind the conversion tools (tools/convert_mnist_data, convert_imageset, compute_image_mean), as
// functions so tests can run them. Outputs follow Caffe's layouts, so Caffe reads what these write and the
// other way round. Every bad input is a strata::Error naming the file (and line or key).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/data/db.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

// An IDX file of unsigned bytes (LeCun's MNIST format): big-endian magic 0x0000080N (N = number of
// dimensions), N big-endian uint32 sizes, then the bytes. Read through zlib, so gzipped files work too.
struct IdxFile {
  std::vector<int> dims;
  std::string bytes;
};
// `expected_magic` is 2051 for images (3 dimensions) and 2049 for labels (1 dimension).
IdxFile ReadIdxFile(const std::string& filename, uint32_t expected_magic);

// MNIST images + labels -> database `db` (LMDB or LevelDB): keys "%08d" of the index, Datum channels 1,
// height x width of the images, raw bytes, label. Returns the number of records.
uint64_t ConvertMnist(const std::string& images_file, const std::string& labels_file, const std::string& db,
                      RecordBackend backend = RecordBackend::kLmdb);

// One line of an image list file: "path label", the label after the last space or tab.
struct ImageListEntry {
  std::string path;
  int label = 0;
  int line = 0;  // 1-based line number in the list file, for messages
};

// Reads a list file of "path label" lines (blank lines skipped, surrounding whitespace trimmed). Error naming
// the file and line for a line without a label or with a label that is not an integer, and for a file that
// cannot be opened. An empty result is not an error here (the caller decides).
std::vector<ImageListEntry> ReadImageList(const std::string& list_file);

struct ImagesetOptions {
  bool gray = false;           // decode as one gray channel instead of BGR
  bool shuffle = false;        // shuffle the list (with `seed`) before writing
  int resize_height = 0;       // resize when both are positive
  int resize_width = 0;
  bool check_size = false;     // every raw image must have the first one's size
  bool encoded = false;        // store encoded images instead of raw pixels
  std::string encode_type;     // "png", "jpg", ...; empty: each file's own extension
  uint64_t seed = 1701;        // for shuffle; Caffe's is unseeded, ours repeats
  RecordBackend backend = RecordBackend::kLmdb;
  bool skip_unreadable = false;  // leave out images that cannot be read (Caffe's way) instead of failing
};
// A list file of "path label" lines (path relative to `root`, which is prefixed as is, so give it a
// trailing slash; the label follows the last space) -> database `db` (options.backend) with keys "%08d_path".
// An image that cannot be read is an error naming it, or with skip_unreadable is left out with a warning, as in
// Caffe. Returns the number of records written.
uint64_t ConvertImageset(const std::string& root, const std::string& list_file, const std::string& db,
                         const ImagesetOptions& options);

// The mean over all records of `db` (encoded ones decoded as stored), as Caffe's 1 x C x H x W BlobProto
// (legacy num/channels/height/width fields). `channel_means`, if given, receives the per-channel means.
BlobProto ComputeImageMean(const std::string& db, std::vector<double>* channel_means = nullptr,
                           RecordBackend backend = RecordBackend::kLmdb);

}  // namespace strata
