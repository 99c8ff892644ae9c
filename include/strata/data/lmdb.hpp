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

#include "strata/data/db.hpp"

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;

namespace strata {

class LmdbCursor;

class LmdbReader : public RecordReader {
 public:
  // `path` is the LMDB directory (Caffe's layout: path/data.mdb) or the data file itself.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const char* backend() const override { return "LMDB"; }
  // A cursor on the first record, in a read-only transaction of its own. size() comes from the database
  // statistics (no scan).
  std::unique_ptr<RecordCursor> NewCursor() const override;

 private:
  MDB_env* env_ = nullptr;
  unsigned int dbi_ = 0;
  const char* map_begin_ = nullptr;  // the data file's bytes in memory
  const char* map_end_ = nullptr;
};

// The records in key order (RecordCursor), in a read-only LMDB transaction of its own.
class LmdbCursor : public RecordCursor {
 public:
  ~LmdbCursor() override;
  void Next() override;
  void SeekToFirst() override;

 private:
  friend class LmdbReader;
  LmdbCursor(const std::string& path, MDB_env* env, unsigned int dbi, uint64_t size, const char* map_begin,
             const char* map_end);
  void Get(int op);

  std::string path_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  const char* map_begin_;
  const char* map_end_;
};

// Writes a new LMDB for the conversion tools. Puts are buffered and committed in transactions of
// `batch_size` records; when the memory map is full the transaction is retried with the map doubled, so
// no size has to be guessed up front. Call Close() to commit the last batch (the destructor discards it).
class LmdbWriter : public RecordWriter {
 public:
  // Writes the database as `path`.partial.<pid> and renames it to `path` in Close(), so `path` appears only
  // complete: a writer destroyed without Close() (an error part way) removes its partial database, and a
  // rerun finds nothing in its way. An existing `path` is an Error (never overwrite a database by accident).
  // The memory map starts at `initial_map_size` bytes (address space only; the file grows as written).
  explicit LmdbWriter(const std::string& path, size_t batch_size = 1000, size_t initial_map_size = size_t(1) << 30);
  ~LmdbWriter() override;
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  void Put(std::string key, std::string value) override;
  // Commits the pending records.
  void Commit();
  // Commits, closes the environment and puts the database in place at `path`.
  void Close() override;

 private:
  std::string path_;
  std::string partial_path_;  // where the database is written until Close()
  size_t batch_size_;
  MDB_env* env_ = nullptr;
  size_t map_size_ = 0;
  std::vector<std::pair<std::string, std::string>> pending_;
};

}  // namespace strata
