// LevelDB access (Caffe's other record database), behind strata/data/db.hpp's interface.
//
// LevelDB lets one process at a time open a database, and opening may write (it takes a lock file and may replay
// its log). So a reader opens a private view of the database: a temporary directory of symbolic links to the
// database's files. Several ranks, and a database on a read-only directory, can then all read it; whatever
// LevelDB writes while opening goes to the view, never to the database.
#pragma once

#include <memory>
#include <string>

#include "strata/data/db.hpp"

namespace leveldb {
class DB;
class Iterator;
class WriteBatch;
}  // namespace leveldb

namespace strata {

class LevelDbReader : public RecordReader {
 public:
  // `path` is the LevelDB directory. Counts the records once (LevelDB keeps no count).
  explicit LevelDbReader(const std::string& path);
  const char* backend() const override { return "LevelDB"; }
  // The cursor shares the open database, which (with its view) goes when the reader and its last cursor have.
  std::unique_ptr<RecordCursor> NewCursor() const override;

 private:
  std::shared_ptr<leveldb::DB> db_;
};

// Writes a new LevelDB as `path`.partial.<pid>, in write batches of `batch_size` records, compacts it (so a
// reader replays no log) and renames it to `path` in Close().
class LevelDbWriter : public RecordWriter {
 public:
  explicit LevelDbWriter(const std::string& path, size_t batch_size = 1000);
  ~LevelDbWriter() override;
  void Put(std::string key, std::string value) override;
  void Close() override;

 private:
  void Commit();
  std::string path_, partial_path_;
  size_t batch_size_;
  size_t pending_ = 0;
  std::unique_ptr<leveldb::DB> db_;
  std::unique_ptr<leveldb::WriteBatch> batch_;
};

}  // namespace strata
