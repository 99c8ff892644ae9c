#include "strata/data/db.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "strata/common.hpp"
#include "strata/data/leveldb.hpp"
#include "strata/data/lmdb.hpp"

namespace strata {

void RecordCursor::Skip(uint64_t n) {
  n %= size_;
  // Going round the end is cheaper from the start when the target lies before the current record.
  if (index_ + n >= size_) {
    n = index_ + n - size_;
    SeekToFirst();
  }
  for (uint64_t i = 0; i < n; ++i) Next();
}

void RecordCursor::SeekToIndex(uint64_t index) {
  index %= size_;
  if (index < index_) SeekToFirst();
  Skip(index - index_);
}

std::string RecordCursor::describe_key() const {
  std::string s = "key '";
  for (char c : key_) {
    if (c >= 0x20 && c < 0x7f) {
      s += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
      s += buf;
    }
  }
  return s + "'";
}

RecordBackend ParseRecordBackend(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "lmdb") return RecordBackend::kLmdb;
  STRATA_REQUIRE(lower == "leveldb") << "unknown database backend '" << name << "' (known: lmdb, leveldb)";
  return RecordBackend::kLevelDb;
}

std::unique_ptr<RecordReader> OpenRecords(const std::string& path, RecordBackend backend) {
  if (backend == RecordBackend::kLevelDb) return std::make_unique<LevelDbReader>(path);
  return std::make_unique<LmdbReader>(path);
}

std::unique_ptr<RecordWriter> CreateRecords(const std::string& path, RecordBackend backend) {
  if (backend == RecordBackend::kLevelDb) return std::make_unique<LevelDbWriter>(path);
  return std::make_unique<LmdbWriter>(path);
}

}  // namespace strata
