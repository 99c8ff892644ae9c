// LevelDB, Caffe's other record database: the writer's all-or-nothing behaviour, the reader's order, wrap-around
// and seeking (shared with LMDB through RecordCursor), readers that never write to the database, and the errors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include "data_test_util.hpp"
#include "strata/data/converters.hpp"
#include "strata/data/leveldb.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::Key;
using testing_data::TempDir;

// name -> (size, modification time) of every file in `dir`.
std::map<std::string, std::pair<uintmax_t, int64_t>> Listing(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, int64_t>> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    struct stat st;
    ::stat(e.path().c_str(), &st);
    files[e.path().filename()] = {static_cast<uintmax_t>(st.st_size), st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  }
  return files;
}

TEST(LevelDb, RoundTripWrapsAroundAndSeeks) {
  TempDir dir;
  const std::string db = dir / "db";
  const int n = 2500;
  {
    LevelDbWriter writer(db, 300);
    for (int i = n - 1; i >= 0; --i) writer.Put(Key(i), std::string(100, static_cast<char>('a' + i % 26)));
    EXPECT_FALSE(std::filesystem::exists(db)) << "the database appears only complete";
    writer.Close();
    EXPECT_EQ(writer.records_written(), static_cast<uint64_t>(n));
  }
  LevelDbReader reader(db);
  EXPECT_STREQ(reader.backend(), "LevelDB");
  EXPECT_EQ(reader.size(), static_cast<uint64_t>(n));
  auto cursor = reader.NewCursor();
  for (int i = 0; i < n; ++i, cursor->Next()) {  // key order, whatever the order of the puts
    ASSERT_EQ(cursor->index(), static_cast<uint64_t>(i));
    ASSERT_EQ(cursor->key(), Key(i));
    ASSERT_EQ(cursor->value(), std::string(100, static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(cursor->index(), 0u);
  EXPECT_EQ(cursor->key(), Key(0));
  cursor->SeekToIndex(2498);
  cursor->Skip(5);
  EXPECT_EQ(cursor->key(), Key(3));
  EXPECT_EQ(cursor->index(), 3u);
  cursor->SeekToIndex(n + 7);
  EXPECT_EQ(cursor->key(), Key(7));
  EXPECT_EQ(cursor->describe_key(), "key '00000007'");
  auto other = reader.NewCursor();
  EXPECT_EQ(other->key(), Key(0));
  EXPECT_EQ(cursor->key(), Key(7));
}

// Several readers at once (LevelDB itself allows one process per database), and none of them writes to it.
TEST(LevelDb, ReadersShareTheDatabaseAndLeaveItUntouched) {
  TempDir dir;
  const std::string db = dir / "db";
  testing_data::WriteDatumDb(db, testing_data::IndexDatums(5), RecordBackend::kLevelDb);
  const auto before = Listing(db);
  {
    LevelDbReader a(db), b(db);
    EXPECT_EQ(a.size(), 5u);
    EXPECT_EQ(b.NewCursor()->key(), Key(0));
    auto reader = OpenRecords(db, ParseRecordBackend("LevelDB"));
    EXPECT_EQ(reader->size(), 5u);
  }
  EXPECT_EQ(Listing(db), before) << "a reader wrote to the database";
}

TEST(LevelDb, ConvertMnistWritesEither) {
  TempDir dir;
  const std::string images = dir / "images", labels = dir / "labels";
  std::string idx_images = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x02", 16) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  std::string idx_labels = std::string("\0\0\x08\x01\0\0\0\x02", 8) + std::string("\x03\x09", 2);
  testing_data::WriteFile(images, idx_images);
  testing_data::WriteFile(labels, idx_labels);
  EXPECT_EQ(ConvertMnist(images, labels, dir / "l", RecordBackend::kLevelDb), 2u);
  EXPECT_EQ(ConvertMnist(images, labels, dir / "m", RecordBackend::kLmdb), 2u);
  auto a = OpenRecords(dir / "l", RecordBackend::kLevelDb)->NewCursor();  // a cursor may outlive its reader
  auto lmdb = OpenRecords(dir / "m", RecordBackend::kLmdb);  // an LMDB cursor may not
  auto b = lmdb->NewCursor();
  for (int i = 0; i < 2; ++i, a->Next(), b->Next()) {
    EXPECT_EQ(a->key(), b->key());
    EXPECT_EQ(a->value(), b->value());
  }
}

TEST(LevelDb, ErrorsNameTheDatabase) {
  TempDir dir;
  ExpectErrorContaining([&] { LevelDbReader r(dir / "missing"); }, {dir / "missing", "No such file"});
  std::filesystem::create_directory(dir / "empty_dir");
  ExpectErrorContaining([&] { LevelDbReader r(dir / "empty_dir"); }, {dir / "empty_dir", "not a LevelDB"});
  testing_data::WriteDatumDb(dir / "lmdb", testing_data::IndexDatums(2));
  ExpectErrorContaining([&] { LevelDbReader r(dir / "lmdb"); }, {dir / "lmdb", "not a LevelDB"});
  {
    LevelDbWriter w(dir / "no_records");
    w.Close();
  }
  ExpectErrorContaining([&] { LevelDbReader r(dir / "no_records"); }, {dir / "no_records", "no records"});
  ExpectErrorContaining([&] { LevelDbWriter w(dir / "no_records"); }, {dir / "no_records", "exists"});
  {
    LevelDbWriter w(dir / "abandoned");
    w.Put("k", "v");
  }  // destroyed without Close(): nothing is left behind
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find("abandoned"), std::string::npos) << e.path();
  }
  // A damaged table: every byte after the first 100 of each .ldb file flipped.
  testing_data::WriteDatumDb(dir / "damaged", testing_data::IndexDatums(200), RecordBackend::kLevelDb);
  for (const auto& e : std::filesystem::directory_iterator(dir / "damaged")) {
    if (e.path().extension() != ".ldb") continue;
    std::string bytes = testing_data::ReadAll(e.path());
    for (size_t i = 100; i < bytes.size(); ++i) bytes[i] = static_cast<char>(~bytes[i]);
    testing_data::WriteFile(e.path(), bytes);
  }
  ExpectErrorContaining([&] { LevelDbReader r(dir / "damaged"); }, {dir / "damaged"});
  ExpectErrorContaining([&] { ParseRecordBackend("rocksdb"); }, {"rocksdb", "lmdb, leveldb"});
}

}  // namespace
}  // namespace strata
