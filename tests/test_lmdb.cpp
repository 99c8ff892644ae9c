#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.hpp"
#include "strata/data/lmdb.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::Key;
using testing_data::TempDir;

TEST(Lmdb, RoundTripGrowsTheMapAndWrapsAround) {
  TempDir dir;
  const std::string db = dir / "db";
  const int n = 2500;
  {
    // A 64 KiB map cannot hold 2500 records of 100 bytes: the writer must grow it.
    LmdbWriter writer(db, 1000, 1 << 16);
    for (int i = 0; i < n; ++i) writer.Put(Key(i), std::string(100, static_cast<char>('a' + i % 26)));
    writer.Close();
    EXPECT_EQ(writer.records_written(), static_cast<uint64_t>(n));
  }
  LmdbReader reader(db);
  EXPECT_EQ(reader.size(), static_cast<uint64_t>(n));
  auto cursor = reader.NewCursor();
  for (int i = 0; i < n; ++i, cursor->Next()) {
    ASSERT_EQ(cursor->index(), static_cast<uint64_t>(i));
    ASSERT_EQ(cursor->key(), Key(i));
    ASSERT_EQ(cursor->value(), std::string(100, static_cast<char>('a' + i % 26)));
  }
  // After the last record comes the first.
  EXPECT_EQ(cursor->index(), 0u);
  EXPECT_EQ(cursor->key(), Key(0));

  cursor->SeekToIndex(2498);
  EXPECT_EQ(cursor->key(), Key(2498));
  cursor->Skip(5);  // 2498 + 5 = 2503 -> 3
  EXPECT_EQ(cursor->key(), Key(3));
  EXPECT_EQ(cursor->index(), 3u);
  cursor->SeekToIndex(n + 7);
  EXPECT_EQ(cursor->key(), Key(7));
  cursor->Skip(3 * n + 1);
  EXPECT_EQ(cursor->key(), Key(8));
  EXPECT_EQ(cursor->describe_key(), "key '00000008'");

  // Two cursors are independent.
  auto other = reader.NewCursor();
  EXPECT_EQ(other->key(), Key(0));
  EXPECT_EQ(cursor->key(), Key(8));
}

TEST(Lmdb, OpensWithoutLockFileAndByDataFile) {
  TempDir dir;
  const std::string db = dir / "db";
  testing_data::WriteDatumDb(db, testing_data::IndexDatums(3));
  std::filesystem::remove(db + "/lock.mdb");
  {
    LmdbReader reader(db);
    EXPECT_EQ(reader.size(), 3u);
  }
  EXPECT_FALSE(std::filesystem::exists(db + "/lock.mdb")) << "a reader must not create a lock file";
  LmdbReader by_file(db + "/data.mdb");
  EXPECT_EQ(by_file.size(), 3u);
}

TEST(Lmdb, BadDatabasesAreErrorsNamingThePath) {
  TempDir dir;
  ExpectErrorContaining([&] { LmdbReader r(dir / "missing"); }, {dir / "missing", "No such file"});

  std::filesystem::create_directory(dir / "empty_dir");
  ExpectErrorContaining([&] { LmdbReader r(dir / "empty_dir"); }, {dir / "empty_dir", "not an LMDB"});

  std::filesystem::create_directory(dir / "garbage");
  std::string junk;
  for (int i = 0; i < 20000; ++i) junk += static_cast<char>((i * 7919) % 251);
  testing_data::WriteFile(dir / "garbage/data.mdb", junk);
  ExpectErrorContaining([&] { LmdbReader r(dir / "garbage"); }, {dir / "garbage"});

  // A real database whose data file was overwritten with garbage.
  const std::string db = dir / "db";
  testing_data::WriteDatumDb(db, testing_data::IndexDatums(5));
  testing_data::WriteFile(db + "/data.mdb", junk);
  ExpectErrorContaining([&] { LmdbReader r(db); }, {db});

  // A data file cut short (a copy that did not finish) would be a SIGBUS when read.
  const std::string cut = dir / "cut";
  testing_data::WriteDatumDb(cut, testing_data::IndexDatums(2000));
  std::filesystem::resize_file(cut + "/data.mdb", std::filesystem::file_size(cut + "/data.mdb") / 2);
  ExpectErrorContaining([&] { LmdbReader r(cut); }, {cut, "truncated"});

  testing_data::WriteFile(dir / "plain_file", "not a database at all");
  ExpectErrorContaining([&] { LmdbReader r(dir / "plain_file"); }, {dir / "plain_file"});

  // A database without records.
  {
    LmdbWriter w(dir / "no_records");
    w.Close();
  }
  ExpectErrorContaining([&] { LmdbReader r(dir / "no_records"); }, {dir / "no_records", "no records"});

  // The writer never overwrites.
  ExpectErrorContaining([&] { LmdbWriter w(db); }, {db, "exists"});
}

// The database appears at its path only when complete: a writer destroyed without Close() (the conversion
// failed) removes what it wrote, and the path is free for the next attempt.
TEST(Lmdb, WriterPutsTheDatabaseInPlaceOnlyOnClose) {
  TempDir dir;
  const std::string db = dir / "db";
  {
    LmdbWriter w(db, 2);
    for (int i = 0; i < 5; ++i) w.Put(Key(i), "value");  // two batches committed
    EXPECT_FALSE(std::filesystem::exists(db));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a writer never closed leaves nothing";
  {
    LmdbWriter w(db, 2);
    w.Put(Key(0), "value");
    w.Close();
  }
  EXPECT_TRUE(std::filesystem::exists(db + "/data.mdb"));
  EXPECT_EQ(LmdbReader(db).NewCursor()->key(), Key(0));
}

}  // namespace
}  // namespace strata
