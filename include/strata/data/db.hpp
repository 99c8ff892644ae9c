// The record databases Caffe's data layers read and its tools write: LMDB (strata/data/lmdb.hpp) and LevelDB
// (strata/data/leveldb.hpp), behind one interface. Records are read in key order and addressed by their position
// (0 .. size()-1) in that order, which is what the data layer's sharding and resume work in.
//
// Every failure is a strata::Error naming the database (and the record's key where there is one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace strata {

// Walks the records in key order and wraps around to the first after the last. The key and value views stay
// valid until the cursor moves.
class RecordCursor {
 public:
  virtual ~RecordCursor() = default;
  RecordCursor(const RecordCursor&) = delete;
  RecordCursor& operator=(const RecordCursor&) = delete;

  std::string_view key() const { return key_; }
  std::string_view value() const { return value_; }
  // Position of the current record in key order.
  uint64_t index() const { return index_; }

  // Moves to the next record (the first one after the last).
  virtual void Next() = 0;
  virtual void SeekToFirst() = 0;
  // Moves forward `n` records, wrapping around; cheap per record (no decoding), and n is reduced modulo the
  // record count first.
  void Skip(uint64_t n);
  // Moves to record `index` modulo the record count (forward from here when it lies ahead).
  void SeekToIndex(uint64_t index);

  // "key '00000012'" for messages, with unprintable bytes escaped.
  std::string describe_key() const;

 protected:
  explicit RecordCursor(uint64_t size) : size_(size) {}
  uint64_t size_;
  uint64_t index_ = 0;
  std::string_view key_;
  std::string_view value_;
};

class RecordReader {
 public:
  virtual ~RecordReader() = default;
  const std::string& path() const { return path_; }
  // Number of records.
  uint64_t size() const { return size_; }
  // "LMDB" or "LevelDB", for messages.
  virtual const char* backend() const = 0;
  // A cursor on the first record, independent of every other cursor (each may live in its own thread). Keep the
  // reader while its cursors are in use (a LevelDB cursor keeps the database open itself; an LMDB one does not).
  virtual std::unique_ptr<RecordCursor> NewCursor() const = 0;

 protected:
  explicit RecordReader(const std::string& path) : path_(path) {}
  std::string path_;
  uint64_t size_ = 0;
};

// Writes a new database for the conversion tools. The database appears at its path only complete, in Close();
// a writer destroyed without Close() (an error part way) removes what it wrote, and an existing path is an Error
// (a database is never overwritten by accident).
class RecordWriter {
 public:
  virtual ~RecordWriter() = default;
  virtual void Put(std::string key, std::string value) = 0;
  // Commits, closes and puts the database in place.
  virtual void Close() = 0;
  uint64_t records_written() const { return written_; }

 protected:
  uint64_t written_ = 0;
};

// The backends by their name in prototxt and on tool command lines ("lmdb", "leveldb", any case).
enum class RecordBackend { kLmdb, kLevelDb };
RecordBackend ParseRecordBackend(const std::string& name);

std::unique_ptr<RecordReader> OpenRecords(const std::string& path, RecordBackend backend);
std::unique_ptr<RecordWriter> CreateRecords(const std::string& path, RecordBackend backend);

}  // namespace strata
