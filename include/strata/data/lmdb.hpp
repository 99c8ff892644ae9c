// LMDB access for the data layer and the conversion tools. Records are read in key order and addressed by
// their position (0 .. size()-1) in that order, which is what the data layer's sharding and resume work in.
//
// Reading opens the environment read-only without a lock file (MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS), so a
// database on a read-only directory works, and several cursors (each in its own read-only transaction) may
// live in different threads. The database must not be written while it is being read.
//
// Every failure is a strata::Error naming the database path (and the record's key where there is one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;

namespace strata {

class LmdbCursor;

class LmdbReader {
 public:
  // `path` is the LMDB directory (Caffe's layout: path/data.mdb) or the data file itself.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const { return path_; }
  // Number of records (from the database statistics; no scan).
  uint64_t size() const { return size_; }
  // A cursor on the first record, in a read-only transaction of its own.
  std::unique_ptr<LmdbCursor> NewCursor() const;

 private:
  std::string path_;
  MDB_env* env_ = nullptr;
  unsigned int dbi_ = 0;
  uint64_t size_ = 0;
  const char* map_begin_ = nullptr;  // the data file's bytes in memory
  const char* map_end_ = nullptr;
};

// Walks the records in key order and wraps around to the first after the last. The key and value views
// point into the memory map and stay valid until the cursor moves.
class LmdbCursor {
 public:
  ~LmdbCursor();
  LmdbCursor(const LmdbCursor&) = delete;
  LmdbCursor& operator=(const LmdbCursor&) = delete;

  std::string_view key() const { return key_; }
  std::string_view value() const { return value_; }
  // Position of the current record in key order.
  uint64_t index() const { return index_; }

  // Moves to the next record (the first one after the last).
  void Next();
  // Moves forward `n` records, wrapping around; cheap per record (no decoding), and n is reduced modulo
  // the record count first.
  void Skip(uint64_t n);
  // Moves to record `index` modulo the record count.
  void SeekToIndex(uint64_t index);
  void SeekToFirst();

  // "key '00000012'" for messages, with unprintable bytes escaped.
  std::string describe_key() const;

 private:
  friend class LmdbReader;
  LmdbCursor(const std::string& path, MDB_env* env, unsigned int dbi, uint64_t size, const char* map_begin,
             const char* map_end);
  void Get(int op);

  std::string path_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  uint64_t size_ = 0;
  uint64_t index_ = 0;
  const char* map_begin_;
  const char* map_end_;
  std::string_view key_;
  std::string_view value_;
};

// Writes a new LMDB for the conversion tools. Puts are buffered and committed in transactions of
// `batch_size` records; when the memory map is full the transaction is retried with the map doubled, so
// no size has to be guessed up front. Call Close() to commit the last batch (the destructor discards it).
class LmdbWriter {
 public:
  // Writes the database as `path`.partial.<pid> and renames it to `path` in Close(), so `path` appears only
  // complete: a writer destroyed without Close() (an error part way) removes its partial database, and a
  // rerun finds nothing in its way. An existing `path` is an Error (never overwrite a database by accident).
  // The memory map starts at `initial_map_size` bytes (address space only; the file grows as written).
  explicit LmdbWriter(const std::string& path, size_t batch_size = 1000, size_t initial_map_size = size_t(1) << 30);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  void Put(std::string key, std::string value);
  // Commits the pending records.
  void Commit();
  // Commits, closes the environment and puts the database in place at `path`.
  void Close();
  uint64_t records_written() const { return written_; }

 private:
  std::string path_;
  std::string partial_path_;  // where the database is written until Close()
  size_t batch_size_;
  MDB_env* env_ = nullptr;
  size_t map_size_ = 0;
  uint64_t written_ = 0;
  std::vector<std::pair<std::string, std::string>> pending_;
};

}  // namespace strata
