#include "strata/data/lmdb.hpp"

#include <lmdb.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "strata/common.hpp"

namespace strata {

namespace {

std::string mdb_message(int rc) { return mdb_strerror(rc); }

// LMDB checks some page invariants with assertions and aborts the process when one fails, which a damaged
// file can trigger. Its assert hook runs first: throwing from there unwinds through LMDB's frames (they
// carry unwind tables on x86-64), so the damage becomes an Error; the read-only transaction is then only
// aborted, never used again.
void ThrowOnAssert(MDB_env* env, const char* message) {
  const char* path = static_cast<const char*>(mdb_env_get_userctx(env));
  throw Error("LMDB '" + std::string(path ? path : "?") + "' is corrupt (" + message + ")");
}

// Where the file `st` names is mapped into this process, from /proc/self/maps: the start addresses.
std::vector<uintptr_t> MappingsOf(const struct stat& st) {
  std::vector<uintptr_t> starts;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long begin = 0, end = 0, offset = 0, inode = 0;
    unsigned int dev_major = 0, dev_minor = 0;
    char perms[8];
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &begin, &end, perms, &offset, &dev_major,
                    &dev_minor, &inode) != 7) {
      continue;
    }
    if (offset == 0 && inode == st.st_ino && dev_major == major(st.st_dev) && dev_minor == minor(st.st_dev)) {
      starts.push_back(static_cast<uintptr_t>(begin));
    }
  }
  return starts;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Reader

LmdbReader::LmdbReader(const std::string& path) : RecordReader(path) {
  struct stat st;
  STRATA_REQUIRE(::stat(path.c_str(), &st) == 0)
      << "cannot open LMDB '" << path << "': " << std::strerror(errno);
  unsigned int flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS;
  std::string data_file = path + "/data.mdb";
  if (S_ISDIR(st.st_mode)) {
    STRATA_REQUIRE(::stat(data_file.c_str(), &st) == 0)
        << "'" << path << "' is not an LMDB (the directory has no data.mdb)";
  } else {
    flags |= MDB_NOSUBDIR;  // the path names the data file itself
    data_file = path;
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);

  int rc = mdb_env_create(&env_);
  STRATA_REQUIRE(rc == MDB_SUCCESS) << "cannot open LMDB '" << path << "': " << mdb_message(rc);
  mdb_env_set_userctx(env_, const_cast<char*>(path_.c_str()));
  mdb_env_set_assert(env_, ThrowOnAssert);
  // Closes the environment before throwing, so a failed open leaks nothing.
  auto fail = [&](const std::string& message) {
    mdb_env_close(env_);
    env_ = nullptr;
    throw Error(message);
  };
  MDB_txn* txn = nullptr;
  // The mapping LMDB is about to make is the one that was not there before (LMDB does not tell where).
  const std::vector<uintptr_t> mapped_before = MappingsOf(st);
  rc = mdb_env_open(env_, path.c_str(), flags, 0664);
  if (rc == MDB_SUCCESS) rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc == MDB_SUCCESS) rc = mdb_dbi_open(txn, nullptr, 0, &dbi_);
  MDB_stat db_stat;
  if (rc == MDB_SUCCESS) rc = mdb_stat(txn, dbi_, &db_stat);
  // Committing (rather than aborting) keeps the database handle open for later transactions.
  if (rc == MDB_SUCCESS) {
    rc = mdb_txn_commit(txn);
  } else if (txn) {
    mdb_txn_abort(txn);
  }
  if (rc != MDB_SUCCESS) fail("cannot open LMDB '" + path + "': " + mdb_message(rc));
  size_ = db_stat.ms_entries;
  if (size_ == 0) fail("LMDB '" + path + "' holds no records");

  // A truncated data file would be a SIGBUS at the first touch of a missing page: refuse it here.
  MDB_envinfo info;
  MDB_stat env_stat;
  if (mdb_env_info(env_, &info) == MDB_SUCCESS && mdb_env_stat(env_, &env_stat) == MDB_SUCCESS) {
    const uint64_t needed = (static_cast<uint64_t>(info.me_last_pgno) + 1) * env_stat.ms_psize;
    if (needed > file_bytes) {
      fail("LMDB '" + path + "' is truncated: its data file holds " + std::to_string(file_bytes) +
           " bytes but the database needs " + std::to_string(needed));
    }
  }
  // Remember where the file's bytes lie in memory, so that a corrupt record pointing elsewhere is an Error.
  std::vector<uintptr_t> ours;
  for (uintptr_t start : MappingsOf(st)) {
    if (std::find(mapped_before.begin(), mapped_before.end(), start) == mapped_before.end()) ours.push_back(start);
  }
  if (ours.size() == 1) {
    map_begin_ = reinterpret_cast<const char*>(ours[0]);
    map_end_ = map_begin_ + file_bytes;
  }
}

LmdbReader::~LmdbReader() {
  if (env_) mdb_env_close(env_);
}

std::unique_ptr<RecordCursor> LmdbReader::NewCursor() const {
  return std::unique_ptr<RecordCursor>(new LmdbCursor(path_, env_, dbi_, size_, map_begin_, map_end_));
}

// ---------------------------------------------------------------------------------------------------------
// Cursor

LmdbCursor::LmdbCursor(const std::string& path, MDB_env* env, unsigned int dbi, uint64_t size,
                       const char* map_begin, const char* map_end)
    : RecordCursor(size), path_(path), map_begin_(map_begin), map_end_(map_end) {
  int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn_);
  STRATA_REQUIRE(rc == MDB_SUCCESS) << "LMDB '" << path_ << "': cannot begin a read transaction: "
                                    << mdb_message(rc);
  rc = mdb_cursor_open(txn_, dbi, &cursor_);
  if (rc != MDB_SUCCESS) {
    mdb_txn_abort(txn_);
    STRATA_FAIL() << "LMDB '" << path_ << "': cannot open a cursor: " << mdb_message(rc);
  }
  SeekToFirst();
}

LmdbCursor::~LmdbCursor() {
  mdb_cursor_close(cursor_);
  mdb_txn_abort(txn_);
}

void LmdbCursor::Get(int op) {
  MDB_val k, v;
  int rc = mdb_cursor_get(cursor_, &k, &v, static_cast<MDB_cursor_op>(op));
  if (rc == MDB_NOTFOUND && op == MDB_NEXT) {
    rc = mdb_cursor_get(cursor_, &k, &v, MDB_FIRST);
    index_ = 0;
  }
  STRATA_REQUIRE(rc == MDB_SUCCESS) << "LMDB '" << path_ << "': cannot read record " << index_ << ": "
                                    << mdb_message(rc);
  key_ = std::string_view(static_cast<const char*>(k.mv_data), k.mv_size);
  value_ = std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
  // Records live in the mapped file; a pointer outside the file's bytes means a corrupt page, and touching
  // it could crash.
  if (map_begin_) {
    auto inside = [&](std::string_view s) {
      return s.data() >= map_begin_ && s.data() <= map_end_ && s.size() <= static_cast<size_t>(map_end_ - s.data());
    };
    STRATA_REQUIRE(inside(key_) && inside(value_))
        << "LMDB '" << path_ << "' is corrupt: record " << index_ << " points outside the data file";
  }
}

void LmdbCursor::SeekToFirst() {
  index_ = 0;
  Get(MDB_FIRST);
}

void LmdbCursor::Next() {
  ++index_;
  Get(MDB_NEXT);  // wraps to the first record (and index 0) after the last
}

// ---------------------------------------------------------------------------------------------------------
// Writer

namespace {

// Removes a database directory the writer made (its two files, then the directory); quiet, for cleanup paths.
void remove_lmdb_dir(const std::string& dir) {
  ::unlink((dir + "/data.mdb").c_str());
  ::unlink((dir + "/lock.mdb").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

LmdbWriter::LmdbWriter(const std::string& path, size_t batch_size, size_t initial_map_size)
    : path_(path),
      partial_path_(path + ".partial." + std::to_string(::getpid())),
      batch_size_(batch_size > 0 ? batch_size : 1),
      map_size_(initial_map_size) {
  struct stat st;
  const int err = ::stat(path.c_str(), &st) == 0 ? EEXIST : errno;
  STRATA_REQUIRE(err == ENOENT) << "cannot create LMDB '" << path << "': " << std::strerror(err)
                                << (err == EEXIST ? " (remove it first; an existing database is never overwritten)" : "");
  remove_lmdb_dir(partial_path_);  // left by an earlier process with our pid that was killed
  STRATA_REQUIRE(::mkdir(partial_path_.c_str(), 0755) == 0)
      << "cannot create LMDB '" << path << "' (as " << partial_path_ << "): " << std::strerror(errno);
  int rc = mdb_env_create(&env_);
  if (rc == MDB_SUCCESS) rc = mdb_env_set_mapsize(env_, map_size_);
  if (rc == MDB_SUCCESS) rc = mdb_env_open(env_, partial_path_.c_str(), 0, 0664);
  if (rc != MDB_SUCCESS) {
    if (env_) mdb_env_close(env_);
    env_ = nullptr;
    remove_lmdb_dir(partial_path_);
    STRATA_FAIL() << "cannot create LMDB '" << path << "': " << mdb_message(rc);
  }
  pending_.reserve(batch_size_);
}

LmdbWriter::~LmdbWriter() {
  // Not closed: the conversion failed part way. Its partial database goes, so a rerun can write `path`.
  if (env_) {
    mdb_env_close(env_);
    remove_lmdb_dir(partial_path_);
  }
}

void LmdbWriter::Put(std::string key, std::string value) {
  CHECK(env_) << "LmdbWriter used after Close()";
  pending_.emplace_back(std::move(key), std::move(value));
  if (pending_.size() >= batch_size_) Commit();
}

void LmdbWriter::Commit() {
  CHECK(env_) << "LmdbWriter used after Close()";
  if (pending_.empty()) return;
  for (;;) {
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    STRATA_REQUIRE(rc == MDB_SUCCESS) << "LMDB '" << path_ << "': cannot begin a write transaction: "
                                      << mdb_message(rc);
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    for (size_t i = 0; rc == MDB_SUCCESS && i < pending_.size(); ++i) {
      MDB_val k{pending_[i].first.size(), const_cast<char*>(pending_[i].first.data())};
      MDB_val v{pending_[i].second.size(), const_cast<char*>(pending_[i].second.data())};
      rc = mdb_put(txn, dbi, &k, &v, 0);
    }
    if (rc == MDB_SUCCESS) {
      rc = mdb_txn_commit(txn);  // frees the transaction whatever it returns
    } else {
      mdb_txn_abort(txn);
    }
    if (rc == MDB_MAP_FULL) {
      // Grow the map (only possible with no transaction open) and redo the whole batch.
      map_size_ *= 2;
      rc = mdb_env_set_mapsize(env_, map_size_);
      STRATA_REQUIRE(rc == MDB_SUCCESS) << "LMDB '" << path_ << "': cannot grow the map to " << map_size_
                                        << " bytes: " << mdb_message(rc);
      continue;
    }
    STRATA_REQUIRE(rc == MDB_SUCCESS) << "LMDB '" << path_ << "': cannot write records: " << mdb_message(rc);
    break;
  }
  written_ += pending_.size();
  pending_.clear();
}

void LmdbWriter::Close() {
  if (!env_) return;
  Commit();
  mdb_env_close(env_);
  env_ = nullptr;
  // RENAME_NOREPLACE: a database someone else wrote at `path` meanwhile is not replaced.
  if (::renameat2(AT_FDCWD, partial_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    remove_lmdb_dir(partial_path_);
    STRATA_FAIL() << "cannot create LMDB '" << path_ << "': renaming " << partial_path_ << " to it failed: "
                  << std::strerror(err);
  }
}

}  // namespace strata
