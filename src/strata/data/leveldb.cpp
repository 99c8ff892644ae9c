#include "strata/data/leveldb.hpp"

#include <fcntl.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "strata/common.hpp"

namespace strata {

namespace {

std::string_view view_of(const leveldb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Removes a directory this code made and what is in it; quiet, for cleanup paths.
void remove_tree(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// A private directory of links to the database's files (all but its lock and its info logs).
std::string MakeView(const std::string& path) {
  std::string templ = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                      "/strata_leveldb_XXXXXX";
  STRATA_REQUIRE(::mkdtemp(templ.data()) != nullptr)
      << "LevelDB '" << path << "': cannot make a private view in " << templ << ": " << std::strerror(errno);
  std::error_code ec;
  const std::filesystem::path source = std::filesystem::absolute(path, ec);
  for (const auto& entry : std::filesystem::directory_iterator(source, ec)) {
    const std::string name = entry.path().filename();
    if (name == "LOCK" || name.rfind("LOG", 0) == 0) continue;
    if (::symlink(entry.path().c_str(), (templ + "/" + name).c_str()) != 0) {
      const int err = errno;
      remove_tree(templ);
      STRATA_FAIL() << "LevelDB '" << path << "': cannot link " << name << " into " << templ << ": "
                    << std::strerror(err);
    }
  }
  if (ec) {
    remove_tree(templ);
    STRATA_FAIL() << "cannot open LevelDB '" << path << "': " << ec.message();
  }
  return templ;
}

}  // namespace

// The records in key order (RecordCursor), through an iterator of their own that verifies checksums.
class LevelDbCursor : public RecordCursor {
 public:
  LevelDbCursor(const std::string& path, std::shared_ptr<leveldb::DB> db, uint64_t size)
      : RecordCursor(size), path_(path), db_(std::move(db)) {
    leveldb::ReadOptions options;
    options.verify_checksums = true;
    options.fill_cache = false;
    it_.reset(db_->NewIterator(options));
    SeekToFirst();
  }

  void SeekToFirst() override {
    index_ = 0;
    it_->SeekToFirst();
    Load();
  }

  void Next() override {
    ++index_;
    it_->Next();
    if (!it_->Valid() && it_->status().ok()) {  // past the last record: wrap around
      index_ = 0;
      it_->SeekToFirst();
    }
    Load();
  }

 private:
  void Load() {
    STRATA_REQUIRE(it_->Valid()) << "LevelDB '" << path_ << "': cannot read record " << index_ << ": "
                                 << (it_->status().ok() ? "no such record" : it_->status().ToString());
    key_ = view_of(it_->key());
    value_ = view_of(it_->value());
  }

  std::string path_;
  std::shared_ptr<leveldb::DB> db_;  // declared before it_: the iterator goes first
  std::unique_ptr<leveldb::Iterator> it_;
};

LevelDbReader::LevelDbReader(const std::string& path) : RecordReader(path) {
  struct stat st;
  STRATA_REQUIRE(::stat(path.c_str(), &st) == 0) << "cannot open LevelDB '" << path << "': " << std::strerror(errno);
  STRATA_REQUIRE(S_ISDIR(st.st_mode) && ::stat((path + "/CURRENT").c_str(), &st) == 0)
      << "'" << path << "' is not a LevelDB (no directory with a CURRENT file)";
  const std::string view = MakeView(path);
  leveldb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  leveldb::DB* db = nullptr;
  const leveldb::Status s = leveldb::DB::Open(options, view, &db);
  if (!s.ok()) {
    remove_tree(view);
    STRATA_FAIL() << "cannot open LevelDB '" << path << "': " << s.ToString();
  }
  db_.reset(db, [view](leveldb::DB* d) {
    delete d;
    remove_tree(view);
  });
  // Count the records (and read every block once: a corrupt one is found here, not hours into training).
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++size_;
  const leveldb::Status status = it->status();
  it.reset();
  if (!status.ok() || size_ == 0) {
    db_.reset();
    if (!status.ok()) STRATA_FAIL() << "LevelDB '" << path << "' is corrupt: " << status.ToString();
    STRATA_FAIL() << "LevelDB '" << path << "' holds no records";
  }
}

std::unique_ptr<RecordCursor> LevelDbReader::NewCursor() const {
  return std::make_unique<LevelDbCursor>(path_, db_, size_);
}

LevelDbWriter::LevelDbWriter(const std::string& path, size_t batch_size)
    : path_(path),
      partial_path_(path + ".partial." + std::to_string(::getpid())),
      batch_size_(batch_size > 0 ? batch_size : 1),
      batch_(new leveldb::WriteBatch) {
  struct stat st;
  const int err = ::stat(path.c_str(), &st) == 0 ? EEXIST : errno;
  STRATA_REQUIRE(err == ENOENT) << "cannot create LevelDB '" << path << "': " << std::strerror(err)
                                << (err == EEXIST ? " (remove it first; an existing database is never overwritten)" : "");
  remove_tree(partial_path_);  // left by an earlier process with our pid that was killed
  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.write_buffer_size = 64 << 20;
  leveldb::DB* db = nullptr;
  const leveldb::Status s = leveldb::DB::Open(options, partial_path_, &db);
  if (!s.ok()) {
    remove_tree(partial_path_);
    STRATA_FAIL() << "cannot create LevelDB '" << path << "': " << s.ToString();
  }
  db_.reset(db);
}

LevelDbWriter::~LevelDbWriter() {
  // Not closed: the conversion failed part way. Its partial database goes, so a rerun can write `path`.
  if (db_) {
    db_.reset();
    remove_tree(partial_path_);
  }
}

void LevelDbWriter::Put(std::string key, std::string value) {
  CHECK(db_) << "LevelDbWriter used after Close()";
  batch_->Put(key, value);
  if (++pending_ >= batch_size_) Commit();
}

void LevelDbWriter::Commit() {
  if (pending_ == 0) return;
  const leveldb::Status s = db_->Write(leveldb::WriteOptions(), batch_.get());
  STRATA_REQUIRE(s.ok()) << "LevelDB '" << path_ << "': cannot write records: " << s.ToString();
  written_ += pending_;
  pending_ = 0;
  batch_->Clear();
}

void LevelDbWriter::Close() {
  if (!db_) return;
  Commit();
  db_->CompactRange(nullptr, nullptr);  // everything into tables: readers replay no log
  db_.reset();
  if (::renameat2(AT_FDCWD, partial_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    remove_tree(partial_path_);
    STRATA_FAIL() << "cannot create LevelDB '" << path_ << "': renaming " << partial_path_ << " to it failed: "
                  << std::strerror(err);
  }
}

}  // namespace strata
