#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "data_test_util.hpp"
#include "strata/data/converters.hpp"
#include "strata/data/data_transformer.hpp"
#include "strata/layers/data_layer.hpp"
#include "strata/util/io.hpp"

#ifdef STRATA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::Key;
using testing_data::MakeDatum;
using testing_data::TempDir;
using testing_data::ReadAll;
using testing_data::Shell;
using testing_data::WriteFile;

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string Idx(uint32_t magic, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = BigEndian(magic);
  for (uint32_t d : dims) s += BigEndian(d);
  return s + payload;
}

// 3 images of 2 x 3: image i holds 6i .. 6i+5; labels 7, 0, 9.
void WriteTinyMnist(const TempDir& dir) {
  std::string pixels;
  for (int k = 0; k < 18; ++k) pixels += static_cast<char>(k);
  WriteFile(dir / "images", Idx(2051, {3, 2, 3}, pixels));
  WriteFile(dir / "labels", Idx(2049, {3}, std::string("\x07\x00\x09", 3)));
}

void ExpectTinyMnistDb(const std::string& db) {
  LmdbReader reader(db);
  ASSERT_EQ(reader.size(), 3u);
  auto cursor = reader.NewCursor();
  const int labels[] = {7, 0, 9};
  for (int i = 0; i < 3; ++i, cursor->Next()) {
    EXPECT_EQ(cursor->key(), Key(i));
    // Caffe's Datum wire layout: channels 1, height 2, width 3, data (6 bytes), label.
    std::string expected("\x08\x01\x10\x02\x18\x03\x22\x06", 8);
    for (int k = 0; k < 6; ++k) expected += static_cast<char>(6 * i + k);
    expected += '\x28';
    expected += static_cast<char>(labels[i]);
    EXPECT_EQ(cursor->value(), expected) << "record " << i;
  }
}

TEST(ConvertTools, MnistPlainAndGzipped) {
  TempDir dir;
  WriteTinyMnist(dir);
  EXPECT_EQ(ConvertMnist(dir / "images", dir / "labels", dir / "plain_db"), 3u);
  ExpectTinyMnistDb(dir / "plain_db");
  ASSERT_EQ(Shell("gzip -k " + dir / "images" + " " + dir / "labels"), 0);
  EXPECT_EQ(ConvertMnist(dir / "images.gz", dir / "labels.gz", dir / "gz_db"), 3u);
  ExpectTinyMnistDb(dir / "gz_db");
}

TEST(ConvertTools, MnistBadInputsAreErrors) {
  TempDir dir;
  WriteTinyMnist(dir);
  ExpectErrorContaining([&] { ConvertMnist(dir / "labels", dir / "images", dir / "db"); },
                        {dir / "labels", "magic number 2049", "expected 2051"});
  const std::string images = ReadAll(dir / "images");
  WriteFile(dir / "truncated", images.substr(0, images.size() - 1));
  ExpectErrorContaining([&] { ConvertMnist(dir / "truncated", dir / "labels", dir / "db"); },
                        {dir / "truncated", "truncated"});
  WriteFile(dir / "two_labels", Idx(2049, {2}, std::string("\x01\x02", 2)));
  ExpectErrorContaining([&] { ConvertMnist(dir / "images", dir / "two_labels", dir / "db"); },
                        {"3 images", "2 labels"});
  ExpectErrorContaining([&] { ConvertMnist(dir / "nope", dir / "labels", dir / "db"); }, {dir / "nope"});
  WriteFile(dir / "tiny", "ab");
  ExpectErrorContaining([&] { ConvertMnist(dir / "tiny", dir / "labels", dir / "db"); }, {dir / "tiny"});
  EXPECT_FALSE(std::filesystem::exists(dir / "db")) << "no database is created from bad input";
}

TEST(ConvertTools, ImageMeanByHand) {
  TempDir dir;
  testing_data::WriteDatumDb(dir / "db", {MakeDatum(1, 1, 2, {0, 10}, 0), MakeDatum(1, 1, 2, {4, 20}, 1)});
  std::vector<double> channel_means;
  const BlobProto mean = ComputeImageMean(dir / "db", &channel_means);
  EXPECT_EQ(mean.num(), 1);
  EXPECT_EQ(mean.channels(), 1);
  EXPECT_EQ(mean.height(), 1);
  EXPECT_EQ(mean.width(), 2);
  ASSERT_EQ(mean.data_size(), 2);
  EXPECT_EQ(mean.data(0), 2.0f);
  EXPECT_EQ(mean.data(1), 15.0f);
  EXPECT_EQ(channel_means, (std::vector<double>{8.5}));
  // The file works as a mean_file: (x - mean) per pixel.
  WriteProtoToBinaryFile(mean, dir / "mean.binaryproto");
  TransformationParameter p;
  p.set_mean_file(dir / "mean.binaryproto");
  DataTransformer<double> t(p, TEST);
  std::vector<double> out(2);
  t.Transform(MakeDatum(1, 1, 2, {3, 16}, 0), out.data());
  EXPECT_EQ(out, (std::vector<double>{1, 1}));

  testing_data::WriteDatumDb(dir / "mixed", {MakeDatum(1, 1, 2, {0, 10}, 0), MakeDatum(1, 2, 1, {4, 20}, 1)});
  ExpectErrorContaining([&] { ComputeImageMean(dir / "mixed"); }, {dir / "mixed", Key(1), "1 x 2 x 1"});
}

#ifdef STRATA_USE_OPENCV
TEST(ConvertTools, Imageset) {
  TempDir dir;
  std::filesystem::create_directories(dir / "imgs/sub dir");
  cv::Mat a(2, 3, CV_8UC3), b(4, 4, CV_8UC3, cv::Scalar(1, 2, 3));
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int k = 0; k < 3; ++k) a.at<cv::Vec3b>(y, x)[k] = static_cast<uint8_t>(10 * (3 * y + x) + k);
  ASSERT_TRUE(cv::imwrite(dir / "imgs/a.png", a));
  ASSERT_TRUE(cv::imwrite(dir / "imgs/sub dir/b.png", b));
  WriteFile(dir / "list.txt", "a.png 1\n\nsub dir/b.png 2\r\n");
  const std::string root = dir / "imgs/";

  ImagesetOptions raw;
  EXPECT_EQ(ConvertImageset(root, dir / "list.txt", dir / "raw", raw), 2u);
  {
    LmdbReader reader(dir / "raw");
    auto c = reader.NewCursor();
    EXPECT_EQ(c->key(), "00000000_a.png");
    Datum d;
    ASSERT_TRUE(ParseDatum(c->value(), &d));
    EXPECT_EQ(d.channels(), 3);
    EXPECT_EQ(d.height(), 2);
    EXPECT_EQ(d.width(), 3);
    EXPECT_EQ(d.label(), 1);
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<uint8_t>(d.data()[k * 6 + i]), 10 * i + k);
    c->Next();
    EXPECT_EQ(c->key(), "00000001_sub dir/b.png");
  }

  ImagesetOptions gray_resized;
  gray_resized.gray = true;
  gray_resized.resize_height = 5;
  gray_resized.resize_width = 7;
  gray_resized.check_size = true;
  ConvertImageset(root, dir / "list.txt", dir / "gray", gray_resized);
  {
    LmdbReader reader(dir / "gray");
    Datum d;
    ASSERT_TRUE(ParseDatum(reader.NewCursor()->value(), &d));
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 5);
    EXPECT_EQ(d.width(), 7);
  }

  ImagesetOptions encoded;
  encoded.encoded = true;
  ConvertImageset(root, dir / "list.txt", dir / "encoded", encoded);
  {
    LmdbReader reader(dir / "encoded");
    Datum d;
    ASSERT_TRUE(ParseDatum(reader.NewCursor()->value(), &d));
    EXPECT_TRUE(d.encoded());
    EXPECT_EQ(d.data(), ReadAll(dir / "imgs/a.png"));  // same format: the file's own bytes
    DatumPixels px;
    px.Load(d);
    EXPECT_EQ(px.channels(), 3);
    EXPECT_EQ(px.bytes()[1], 10);  // channel 0, pixel 1
  }
  encoded.encode_type = "jpg";
  ConvertImageset(root, dir / "list.txt", dir / "jpg", encoded);
  {
    LmdbReader reader(dir / "jpg");
    Datum d;
    ASSERT_TRUE(ParseDatum(reader.NewCursor()->value(), &d));
    EXPECT_EQ(d.data().substr(0, 2), "\xff\xd8");  // a JPEG
  }

  ImagesetOptions shuffled;
  shuffled.shuffle = true;
  ConvertImageset(root, dir / "list.txt", dir / "shuffled", shuffled);
  {
    LmdbReader reader(dir / "shuffled");
    auto c = reader.NewCursor();
    std::set<std::string> names;
    for (int i = 0; i < 2; ++i, c->Next()) names.insert(std::string(c->key().substr(9)));
    EXPECT_EQ(names, (std::set<std::string>{"a.png", "sub dir/b.png"}));
  }

  ImagesetOptions check;
  check.check_size = true;
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "list.txt", dir / "check", check); },
                        {"b.png", "first image"});
  WriteFile(dir / "bad_list.txt", "a.png 1\nb.png\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "bad_list.txt", dir / "bad", raw); },
                        {dir / "bad_list.txt:2"});
  WriteFile(dir / "bad_label.txt", "a.png one\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "bad_label.txt", dir / "bad2", raw); },
                        {dir / "bad_label.txt:1", "'one'"});
  WriteFile(dir / "missing.txt", "nope.png 1\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "missing.txt", dir / "none", raw); },
                        {"cannot read '" + root + "nope.png' (" + (dir / "missing.txt") + ":1)", "--skip_unreadable"});
}

// A missing or empty image in the list is an error naming it and its line; --skip_unreadable leaves such images
// out with a warning, as Caffe's convert_imageset does, and still refuses a list of which nothing can be read.
TEST(ConvertTools, UnreadableImagesAreErrorsUnlessSkipped) {
  TempDir dir;
  std::filesystem::create_directories(dir / "imgs");
  ASSERT_TRUE(cv::imwrite(dir / "imgs/a.png", cv::Mat(2, 3, CV_8UC3, cv::Scalar(1, 2, 3))));
  WriteFile(dir / "imgs/empty.png", "");
  const std::string root = dir / "imgs/";
  WriteFile(dir / "list.txt", "a.png 1\ngone.png 2\nempty.png 3\n");
  ImagesetOptions options;
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "list.txt", dir / "db", options); },
                        {"cannot read '" + root + "gone.png' (" + (dir / "list.txt") + ":2)", "--skip_unreadable"});
  WriteFile(dir / "list2.txt", "a.png 1\nempty.png 3\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "list2.txt", dir / "db", options); },
                        {"cannot read '" + root + "empty.png' (" + (dir / "list2.txt") + ":2)"});
  EXPECT_FALSE(std::filesystem::exists(dir / "db"));
  options.skip_unreadable = true;
  EXPECT_EQ(ConvertImageset(root, dir / "list.txt", dir / "db", options), 1u);
  WriteFile(dir / "none.txt", "gone.png 2\nempty.png 3\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "none.txt", dir / "db2", options); }, {"could be read"});
}

// A conversion that fails leaves no database behind, empty or partial, so the rerun after fixing the input
// works (the failed run used to leave `db` in place and the rerun stopped at "exists").
TEST(ConvertTools, FailedImagesetLeavesNothingAndRerunWorks) {
  TempDir dir;
  std::filesystem::create_directories(dir / "imgs");
  ASSERT_TRUE(cv::imwrite(dir / "imgs/a.png", cv::Mat(2, 3, CV_8UC3, cv::Scalar(1, 2, 3))));
  ASSERT_TRUE(cv::imwrite(dir / "imgs/b.png", cv::Mat(4, 4, CV_8UC3, cv::Scalar(4, 5, 6))));
  const std::string root = dir / "imgs/";
  const std::string db = dir / "db";
  auto no_leftovers = [&] {
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find("db"), std::string::npos) << e.path();
  };
  // No image readable.
  WriteFile(dir / "list.txt", "nope.png 1\n");
  ImagesetOptions options;
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "list.txt", db, options); }, {"cannot read"});
  no_leftovers();
  // Fails at the second image, after the first was written: the partial database goes too.
  options.check_size = true;
  options.resize_height = 0;
  WriteFile(dir / "list.txt", "a.png 1\nb.png 2\n");
  ExpectErrorContaining([&] { ConvertImageset(root, dir / "list.txt", db, options); }, {"first image"});
  no_leftovers();
  // Fixed input, same output path: works.
  WriteFile(dir / "list.txt", "a.png 1\n");
  EXPECT_EQ(ConvertImageset(root, dir / "list.txt", db, options), 1u);
  EXPECT_EQ(LmdbReader(db).NewCursor()->key(), "00000000_a.png");
}
#endif

// The programs themselves: a bad input is one "error:" line and exit status 1. Skipped when the tools
// were not built (the test target does not depend on them).
TEST(ConvertTools, ProgramsReportErrors) {
  const std::string bin = std::string(STRATA_BINARY_DIR) + "/bin/";
  if (!std::filesystem::exists(bin + "convert_mnist_data") || !std::filesystem::exists(bin + "compute_image_mean")) {
    GTEST_SKIP() << "tools not built";
  }
  TempDir dir;
  WriteTinyMnist(dir);
  const std::string log = dir / "log";
  EXPECT_EQ(Shell(bin + "convert_mnist_data " + dir / "labels" + " " + dir / "images" + " " + dir / "db 2> " + log), 1);
  EXPECT_EQ(ReadAll(log).rfind("error: ", 0), 0u) << ReadAll(log);
  ConvertMnist(dir / "images", dir / "labels", dir / "db");
  EXPECT_EQ(Shell(bin + "compute_image_mean " + dir / "db " + dir / "mean.binaryproto > " + log + " 2>&1"), 0);
  BlobProto mean;
  ReadProtoFromBinaryFile(dir / "mean.binaryproto", &mean);
  EXPECT_EQ(mean.data_size(), 6);
  EXPECT_EQ(mean.data(0), 6.0f);  // (0 + 6 + 12) / 3
}

// Fashion-MNIST from Debian's dataset-fashion-mnist, when installed: the test set converts, and the Data
// layer reads it far faster than LeNet trains.
TEST(ConvertTools, FashionMnistSmoke) {
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(src + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  TempDir dir;
  EXPECT_EQ(ConvertMnist(src + "t10k-images-idx3-ubyte.gz", src + "t10k-labels-idx1-ubyte.gz", dir / "test"), 10000u);
  const IdxFile labels = ReadIdxFile(src + "t10k-labels-idx1-ubyte.gz", 2049);
  LayerParameter p;
  p.set_name("data");
  p.set_type("Data");
  p.mutable_data_param()->set_source(dir / "test");
  p.mutable_data_param()->set_batch_size(64);
  p.mutable_data_param()->set_backend(DataParameter::LMDB);
  p.mutable_transform_param()->set_scale(1.0f / 256);
  DataLayer<float> layer(p);
  Blob<float> data, label;
  layer.SetUp({}, {&data, &label});
  ASSERT_EQ(data.shape(), (std::vector<int>{64, 1, 28, 28}));
  const auto t0 = std::chrono::steady_clock::now();
  const int batches = 10000 / 64;
  for (int t = 0; t < batches; ++t) {
    layer.Forward({}, {&data, &label});
    ASSERT_EQ(label.cpu_data()[5], static_cast<uint8_t>(labels.bytes[64 * t + 5]));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "Data layer: " << static_cast<int>(batches * 64 / s) << " images/s\n";
}

}  // namespace
}  // namespace strata
