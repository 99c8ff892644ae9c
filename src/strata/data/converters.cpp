#include "strata/data/converters.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "strata/common.hpp"
#include "strata/data/datum.hpp"
#include "strata/data/lmdb.hpp"

namespace strata {

namespace {

// The whole file, gunzipped when it is gzip (zlib reads plain files unchanged).
std::string ReadMaybeGzipped(const std::string& filename) {
  gzFile f = gzopen(filename.c_str(), "rb");
  STRATA_REQUIRE(f != nullptr) << "cannot open '" << filename << "': " << std::strerror(errno ? errno : ENOENT);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      STRATA_FAIL() << "cannot read '" << filename << "': " << msg;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return out;
}

uint32_t big_endian_u32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string record_key(uint64_t index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08llu", static_cast<unsigned long long>(index));
  return buf;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

IdxFile ReadIdxFile(const std::string& filename, uint32_t expected_magic) {
  IdxFile idx;
  std::string bytes = ReadMaybeGzipped(filename);
  STRATA_REQUIRE(bytes.size() >= 4) << "'" << filename << "' is not an IDX file (only " << bytes.size()
                                    << " bytes)";
  const uint32_t magic = big_endian_u32(bytes, 0);
  STRATA_REQUIRE(magic == expected_magic)
      << "'" << filename << "' has IDX magic number " << magic << ", expected " << expected_magic << " ("
      << (expected_magic == 2051 ? "an image file" : expected_magic == 2049 ? "a label file" : "IDX")
      << "; are the image and label files swapped, or is this not an IDX file?)";
  const int num_dims = static_cast<int>(magic & 0xff);
  const size_t header = 4 + 4 * static_cast<size_t>(num_dims);
  STRATA_REQUIRE(bytes.size() >= header) << "'" << filename << "' is truncated inside its IDX header";
  uint64_t payload = 1;
  for (int d = 0; d < num_dims; ++d) {
    const uint32_t size = big_endian_u32(bytes, 4 + 4 * d);
    STRATA_REQUIRE(size > 0 && size < (1u << 31)) << "'" << filename << "' has IDX dimension " << d
                                                  << " of size " << size;
    idx.dims.push_back(static_cast<int>(size));
    payload *= size;
  }
  STRATA_REQUIRE(bytes.size() - header == payload)
      << "'" << filename << "' holds " << bytes.size() - header << " bytes of data but its IDX header ("
      << [&] {
           std::string s;
           for (size_t d = 0; d < idx.dims.size(); ++d) s += (d ? " x " : "") + std::to_string(idx.dims[d]);
           return s;
         }()
      << ") needs " << payload << (bytes.size() - header < payload ? " (truncated file?)" : "");
  idx.bytes = bytes.substr(header);
  return idx;
}

uint64_t ConvertMnist(const std::string& images_file, const std::string& labels_file, const std::string& db,
                      RecordBackend backend) {
  const IdxFile images = ReadIdxFile(images_file, 2051);
  const IdxFile labels = ReadIdxFile(labels_file, 2049);
  const int n = images.dims[0], rows = images.dims[1], cols = images.dims[2];
  STRATA_REQUIRE(labels.dims[0] == n) << "'" << images_file << "' holds " << n << " images but '" << labels_file
                                      << "' holds " << labels.dims[0] << " labels";
  std::unique_ptr<RecordWriter> writer = CreateRecords(db, backend);
  Datum datum;
  datum.set_channels(1);
  datum.set_height(rows);
  datum.set_width(cols);
  const size_t image_bytes = static_cast<size_t>(rows) * cols;
  std::string value;
  for (int i = 0; i < n; ++i) {
    datum.set_data(images.bytes.data() + i * image_bytes, image_bytes);
    datum.set_label(static_cast<unsigned char>(labels.bytes[i]));
    datum.SerializeToString(&value);
    writer->Put(record_key(i), value);
  }
  writer->Close();
  LOG(INFO) << "Wrote " << n << " " << rows << "x" << cols << " images to '" << db << "'";
  return static_cast<uint64_t>(n);
}

std::vector<ImageListEntry> ReadImageList(const std::string& list_file) {
  std::ifstream in(list_file);
  STRATA_REQUIRE(in.good()) << "cannot open image list file '" << list_file << "': " << std::strerror(errno);
  std::vector<ImageListEntry> entries;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    line = trim(line);
    if (line.empty()) continue;
    const size_t space = line.find_last_of(" \t");
    STRATA_REQUIRE(space != std::string::npos)
        << list_file << ":" << line_no << ": expected 'path label', got '" << line << "'";
    const std::string label_text = line.substr(space + 1);
    char* end = nullptr;
    errno = 0;
    const long label = std::strtol(label_text.c_str(), &end, 10);
    STRATA_REQUIRE(*end == '\0' && errno == 0 && label >= INT32_MIN && label <= INT32_MAX)
        << list_file << ":" << line_no << ": the label '" << label_text << "' is not an integer";
    entries.push_back({trim(line.substr(0, space)), static_cast<int>(label), line_no});
  }
  return entries;
}

uint64_t ConvertImageset(const std::string& root, const std::string& list_file, const std::string& db,
                         const ImagesetOptions& options) {
  STRATA_REQUIRE(HaveImageCodecs()) << "convert_imageset needs OpenCV, and Strata was built without it";
  STRATA_REQUIRE(options.resize_height >= 0 && options.resize_width >= 0) << "resize sizes must not be negative";
  STRATA_REQUIRE((options.resize_height > 0) == (options.resize_width > 0))
      << "give both resize_height and resize_width, or neither";
  std::vector<ImageListEntry> lines = ReadImageList(list_file);
  STRATA_REQUIRE(!lines.empty()) << "list file '" << list_file << "' names no images";
  if (options.shuffle) {
    std::mt19937 rng(static_cast<uint32_t>(options.seed));
    std::shuffle(lines.begin(), lines.end(), rng);
  }

  std::unique_ptr<RecordWriter> writer = CreateRecords(db, options.backend);
  Datum datum;
  std::string value;
  uint64_t skipped = 0;
  size_t first_size = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& path = lines[i].path;
    std::string encoding = options.encode_type;
    if (options.encoded && encoding.empty()) {
      const size_t dot = path.rfind('.');
      if (dot != std::string::npos) encoding = path.substr(dot + 1);
      STRATA_REQUIRE(!encoding.empty()) << "cannot guess the encoding of '" << path
                                        << "' from its name; give --encode_type";
    }
    if (!options.encoded) encoding.clear();
    std::string why;
    if (!ReadImageToDatum(root + path, lines[i].label, options.resize_height, options.resize_width,
                          !options.gray, encoding, &datum, &why)) {
      // A missing or empty file is usually a broken copy of the data set: an error, unless asked to skip.
      STRATA_REQUIRE(options.skip_unreadable)
          << "cannot read '" << root + path << "' (" << list_file << ":" << lines[i].line << ") as an image: " << why
          << "; fix the list or the file, or pass --skip_unreadable to leave such images out as Caffe does";
      LOG(WARNING) << "skipping '" << root + path << "' (" << list_file << ":" << lines[i].line << "): " << why;
      ++skipped;
      continue;
    }
    if (options.check_size && !datum.encoded()) {
      if (first_size == 0) first_size = datum.data().size();
      STRATA_REQUIRE(datum.data().size() == first_size)
          << "'" << root + path << "' has " << datum.data().size() << " bytes of pixels (" << datum.channels()
          << " x " << datum.height() << " x " << datum.width() << ") but the first image has " << first_size;
    }
    datum.SerializeToString(&value);
    writer->Put(record_key(i) + "_" + path, value);
    if ((i + 1) % 1000 == 0) LOG(INFO) << "Processed " << i + 1 << " files.";
  }
  // Checked before Close(): a database of no images is never put in place.
  STRATA_REQUIRE(skipped < lines.size()) << "none of the " << lines.size() << " images in '" << list_file
                                         << "' could be read (is the root folder '" << root << "' right?)";
  writer->Close();
  if (skipped) LOG(WARNING) << "Skipped " << skipped << " of " << lines.size() << " images that could not be read";
  LOG(INFO) << "Wrote " << writer->records_written() << " images to '" << db << "'";
  return writer->records_written();
}

BlobProto ComputeImageMean(const std::string& db, std::vector<double>* channel_means, RecordBackend backend) {
  std::unique_ptr<RecordReader> reader = OpenRecords(db, backend);
  auto cursor = reader->NewCursor();
  Datum datum;
  DatumPixels pixels;
  std::vector<double> sum;
  int channels = 0, height = 0, width = 0;
  for (uint64_t i = 0; i < reader->size(); ++i, cursor->Next()) {
    const std::string where = std::string(reader->backend()) + " '" + db + "', " + cursor->describe_key();
    STRATA_REQUIRE(ParseDatum(cursor->value(), &datum)) << where << " is not a Datum";
    try {
      pixels.Load(datum);
    } catch (const Error& e) {
      STRATA_FAIL() << where << ": " << e.what();
    }
    if (i == 0) {
      channels = pixels.channels();
      height = pixels.height();
      width = pixels.width();
      sum.assign(static_cast<size_t>(pixels.count()), 0.0);
    }
    STRATA_REQUIRE(pixels.channels() == channels && pixels.height() == height && pixels.width() == width)
        << where << " is " << pixels.channels() << " x " << pixels.height() << " x " << pixels.width()
        << " but the first record is " << channels << " x " << height << " x " << width
        << "; a mean needs records of one size";
    const size_t n = sum.size();
    if (pixels.bytes()) {
      const uint8_t* p = pixels.bytes();
      for (size_t k = 0; k < n; ++k) sum[k] += p[k];
    } else {
      const float* p = pixels.floats();
      for (size_t k = 0; k < n; ++k) sum[k] += p[k];
    }
    if ((i + 1) % 10000 == 0) LOG(INFO) << "Processed " << i + 1 << " records.";
  }
  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(channels);
  mean.set_height(height);
  mean.set_width(width);
  const double count = static_cast<double>(reader->size());
  for (double s : sum) mean.add_data(static_cast<float>(s / count));
  if (channel_means) {
    channel_means->assign(static_cast<size_t>(channels), 0.0);
    const size_t plane = static_cast<size_t>(height) * width;
    for (int c = 0; c < channels; ++c) {
      double s = 0;
      for (size_t k = 0; k < plane; ++k) s += sum[c * plane + k];
      (*channel_means)[c] = s / count / static_cast<double>(plane);
    }
  }
  return mean;
}

}  // namespace strata
