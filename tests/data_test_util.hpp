// Helpers shared by the data tests: a temporary directory that cleans up after itself, small Datums, and
// an LMDB written from them.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "strata/common.hpp"
#include "strata/data/db.hpp"
#include "strata/data/lmdb.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {
namespace testing_data {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/strata_data_test_XXXXXX";
    const char* made = mkdtemp(pattern);
    CHECK(made) << "mkdtemp failed";
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs a shell command; its exit status (-1 when it did not exit normally, e.g. killed by a signal).
inline int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `s` with the first `from` replaced by `to` (a test failure when `from` is not there).
inline std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A raw-byte Datum of shape c x h x w with the given pixels.
inline Datum MakeDatum(int c, int h, int w, const std::vector<uint8_t>& pixels, int label) {
  Datum d;
  d.set_channels(c);
  d.set_height(h);
  d.set_width(w);
  d.set_data(std::string(pixels.begin(), pixels.end()));
  d.set_label(label);
  return d;
}

// Record i is 1 x 2 x 2 with every pixel = i (mod 256) and label i: batches are easy to check by eye.
inline Datum IndexDatum(int i) {
  return MakeDatum(1, 2, 2, std::vector<uint8_t>(4, static_cast<uint8_t>(i)), i);
}

inline std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

// Writes `datums` under keys "%08d" of their index.
inline void WriteDatumDb(const std::string& path, const std::vector<Datum>& datums,
                         RecordBackend backend = RecordBackend::kLmdb) {
  std::unique_ptr<RecordWriter> writer = CreateRecords(path, backend);
  for (size_t i = 0; i < datums.size(); ++i) writer->Put(Key(static_cast<int>(i)), datums[i].SerializeAsString());
  writer->Close();
}

inline std::vector<Datum> IndexDatums(int n) {
  std::vector<Datum> v;
  for (int i = 0; i < n; ++i) v.push_back(IndexDatum(i));
  return v;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Expects `fn` to throw a strata::Error whose message contains every one of `parts`.
template <typename Fn>
void ExpectErrorContaining(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a strata::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

}  // namespace testing_data
}  // namespace strata
