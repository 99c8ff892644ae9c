#include "strata/data/lmdb.hpp"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "strata/common.hpp"

namespace strata {

namespace {

std::string mdb_message(int rc) { return mdb_strerror(rc); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Reader

LmdbReader::LmdbReader(const std::string& path) : path_(path) {
  struct stat st;
  STRATA_REQUIRE(::stat(path.c_str(), &st) == 0)
      << "cannot open LMDB '" << path << "': " << std::strerror(errno);
  unsigned int flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS;
  if (S_ISDIR(st.st_mode)) {
    struct stat data_st;
    STRATA_REQUIRE(::stat((path + "/data.mdb").c_str(), &data_st) == 0)
        << "'" << path << "' is not an LMDB (the directory has no data.mdb)";
  } else {
    flags |= MDB_NOSUBDIR;  // the path names the data file itself
  }

  int rc = mdb_env_create(&env_);
  STRATA_REQUIRE(rc == MDB_SUCCESS) << "cannot open LMDB '" << path << "': " << mdb_message(rc);
  MDB_txn* txn = nullptr;
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
  if (rc != MDB_SUCCESS) {
    mdb_env_close(env_);
    env_ = nullptr;
    STRATA_FAIL() << "cannot open LMDB '" << path << "': " << mdb_message(rc);
  }
  size_ = db_stat.ms_entries;
  if (size_ == 0) {
    mdb_env_close(env_);
    env_ = nullptr;
    STRATA_FAIL() << "LMDB '" << path << "' holds no records";
  }
}

LmdbReader::~LmdbReader() {
  if (env_) mdb_env_close(env_);
}

std::unique_ptr<LmdbCursor> LmdbReader::NewCursor() const {
  return std::unique_ptr<LmdbCursor>(new LmdbCursor(path_, env_, dbi_, size_));
}

// ---------------------------------------------------------------------------------------------------------
// Cursor

LmdbCursor::LmdbCursor(const std::string& path, MDB_env* env, unsigned int dbi, uint64_t size)
    : path_(path), size_(size) {
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
}

void LmdbCursor::SeekToFirst() {
  index_ = 0;
  Get(MDB_FIRST);
}

void LmdbCursor::Next() {
  ++index_;
  Get(MDB_NEXT);  // wraps to the first record (and index 0) after the last
}

void LmdbCursor::Skip(uint64_t n) {
  n %= size_;
  // Going round the end is cheaper from the start when the target lies before the current record.
  if (index_ + n >= size_) {
    n = index_ + n - size_;
    SeekToFirst();
  }
  for (uint64_t i = 0; i < n; ++i) Next();
}

void LmdbCursor::SeekToIndex(uint64_t index) {
  index %= size_;
  if (index < index_) SeekToFirst();
  Skip(index - index_);
}

std::string LmdbCursor::describe_key() const {
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

// ---------------------------------------------------------------------------------------------------------
// Writer

LmdbWriter::LmdbWriter(const std::string& path, size_t batch_size, size_t initial_map_size)
    : path_(path), batch_size_(batch_size > 0 ? batch_size : 1), map_size_(initial_map_size) {
  STRATA_REQUIRE(::mkdir(path.c_str(), 0755) == 0)
      << "cannot create LMDB '" << path << "': " << std::strerror(errno)
      << (errno == EEXIST ? " (remove it first; an existing database is never overwritten)" : "");
  int rc = mdb_env_create(&env_);
  if (rc == MDB_SUCCESS) rc = mdb_env_set_mapsize(env_, map_size_);
  if (rc == MDB_SUCCESS) rc = mdb_env_open(env_, path.c_str(), 0, 0664);
  if (rc != MDB_SUCCESS) {
    if (env_) mdb_env_close(env_);
    env_ = nullptr;
    STRATA_FAIL() << "cannot create LMDB '" << path << "': " << mdb_message(rc);
  }
  pending_.reserve(batch_size_);
}

LmdbWriter::~LmdbWriter() {
  if (env_) mdb_env_close(env_);
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
}

}  // namespace strata
