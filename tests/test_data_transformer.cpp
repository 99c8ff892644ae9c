#include <gtest/gtest.h>

#include <set>

#include "data_test_util.hpp"
#include "strata/data/data_transformer.hpp"
#include "strata/util/io.hpp"

#ifdef STRATA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::MakeDatum;
using testing_data::TempDir;

std::vector<uint8_t> Iota(int n) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
  return v;
}

// Runs the transformer on one datum, checking OutputShape first, and returns the values.
std::vector<double> TransformDatum(DataTransformer<double>* t, const Datum& d) {
  DatumPixels px;
  px.Load(d, t->color_mode());
  const std::vector<int> shape = t->OutputShape(px.channels(), px.height(), px.width());
  std::vector<double> out(static_cast<size_t>(shape[0]) * shape[1] * shape[2], -999);
  t->Transform(d, out.data());
  return out;
}

void WriteMean(const std::string& file, const std::vector<int>& legacy_shape, const std::vector<float>& values) {
  BlobProto p;
  p.set_num(legacy_shape[0]);
  p.set_channels(legacy_shape[1]);
  p.set_height(legacy_shape[2]);
  p.set_width(legacy_shape[3]);
  for (float v : values) p.add_data(v);
  WriteProtoToBinaryFile(p, file);
}

TEST(DataTransformer, ScaleAndOneMeanValue) {
  TransformationParameter p;
  p.set_scale(0.5f);
  p.add_mean_value(1);
  DataTransformer<double> t(p, TRAIN);
  // (x - 1) * 0.5 for x = 1..6
  EXPECT_EQ(TransformDatum(&t, MakeDatum(1, 2, 3, {1, 2, 3, 4, 5, 6}, 0)), (std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5}));
}

TEST(DataTransformer, MeanValuePerChannel) {
  TransformationParameter p;
  p.add_mean_value(1);
  p.add_mean_value(2);
  DataTransformer<double> t(p, TEST);
  EXPECT_EQ(TransformDatum(&t, MakeDatum(2, 1, 2, {10, 20, 30, 40}, 0)), (std::vector<double>{9, 19, 28, 38}));
  // One value serves every channel.
  TransformationParameter one;
  one.add_mean_value(5);
  DataTransformer<double> t1(one, TEST);
  EXPECT_EQ(TransformDatum(&t1, MakeDatum(2, 1, 2, {10, 20, 30, 40}, 0)), (std::vector<double>{5, 15, 25, 35}));
}

TEST(DataTransformer, MeanFile) {
  TempDir dir;
  WriteMean(dir / "mean.binaryproto", {1, 1, 2, 2}, {1, 2, 3, 4});
  TransformationParameter p;
  p.set_mean_file(dir / "mean.binaryproto");
  p.set_scale(2);
  DataTransformer<double> t(p, TEST);
  // (10-1)*2, (20-2)*2, (30-3)*2, (40-4)*2
  EXPECT_EQ(TransformDatum(&t, MakeDatum(1, 2, 2, {10, 20, 30, 40}, 0)), (std::vector<double>{18, 36, 54, 72}));
}

TEST(DataTransformer, CentreCropInTestUsesUncroppedMeanPositions) {
  TempDir dir;
  std::vector<float> mean(16);
  for (int k = 0; k < 16; ++k) mean[k] = 0.5f * k;
  WriteMean(dir / "mean.binaryproto", {1, 1, 4, 4}, mean);
  TransformationParameter p;
  p.set_crop_size(2);
  DataTransformer<double> plain(p, TEST);
  // 4x4 image 0..15, centre 2x2 starts at (1, 1): pixels 5, 6, 9, 10.
  EXPECT_EQ(TransformDatum(&plain, MakeDatum(1, 4, 4, Iota(16), 0)), (std::vector<double>{5, 6, 9, 10}));
  p.set_mean_file(dir / "mean.binaryproto");
  DataTransformer<double> with_mean(p, TEST);
  // x - x/2 at those positions.
  EXPECT_EQ(TransformDatum(&with_mean, MakeDatum(1, 4, 4, Iota(16), 0)), (std::vector<double>{2.5, 3, 4.5, 5}));
  // 3x5 image, crop 2: offsets ((3-2)/2, (5-2)/2) = (0, 1): pixels 1, 2, 6, 7.
  p.clear_mean_file();
  DataTransformer<double> odd(p, TEST);
  EXPECT_EQ(TransformDatum(&odd, MakeDatum(1, 3, 5, Iota(15), 0)), (std::vector<double>{1, 2, 6, 7}));
}

TEST(DataTransformer, MirrorIsRandomInTrainAndOffInTest) {
  TransformationParameter p;
  p.set_mirror(true);
  const Datum d = MakeDatum(2, 1, 3, {1, 2, 3, 4, 5, 6}, 0);
  const std::vector<double> plain{1, 2, 3, 4, 5, 6}, flipped{3, 2, 1, 6, 5, 4};
  int n_flipped = 0;
  DataTransformer<double> train(p, TRAIN, 7);
  for (int i = 0; i < 64; ++i) {
    const auto out = TransformDatum(&train, d);
    ASSERT_TRUE(out == plain || out == flipped);
    n_flipped += out == flipped;
  }
  EXPECT_GT(n_flipped, 10);
  EXPECT_LT(n_flipped, 54);
  DataTransformer<double> test(p, TEST, 7);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(TransformDatum(&test, d), plain);
}

TEST(DataTransformer, RandomCropInTrainIsSeeded) {
  TransformationParameter p;
  p.set_crop_size(2);
  p.set_mirror(true);
  const Datum d = MakeDatum(1, 4, 4, Iota(16), 0);
  DataTransformer<double> t(p, TRAIN, 3);
  std::set<std::vector<double>> seen;
  for (int i = 0; i < 400; ++i) {
    const auto out = TransformDatum(&t, d);
    // A crop at (h, w) holds v, v+1, v+4, v+5 with v = 4h + w, possibly mirrored.
    const double v = std::min(out[0], out[1]);
    ASSERT_TRUE(out == (std::vector<double>{v, v + 1, v + 4, v + 5}) ||
                out == (std::vector<double>{v + 1, v, v + 5, v + 4}));
    ASSERT_LE(static_cast<int>(v) % 4, 2);
    ASSERT_LE(static_cast<int>(v) / 4, 2);
    seen.insert(out);
  }
  EXPECT_EQ(seen.size(), 18u);  // 9 offsets x 2 mirrors
  // The same seed gives the same sequence.
  DataTransformer<double> a(p, TRAIN, 11), b(p, TRAIN, 11);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(TransformDatum(&a, d), TransformDatum(&b, d));
  a.Reseed(5);
  b.Reseed(5);
  EXPECT_EQ(TransformDatum(&a, d), TransformDatum(&b, d));
}

TEST(DataTransformer, FloatDataAndFloatDtype) {
  Datum d;
  d.set_channels(1);
  d.set_height(1);
  d.set_width(3);
  for (float v : {0.5f, 1.5f, 2.5f}) d.add_float_data(v);
  TransformationParameter p;
  p.set_scale(2);
  DataTransformer<float> t(p, TEST);
  std::vector<float> out(3);
  t.Transform(d, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 3, 5}));
}

TEST(DataTransformer, BadParametersAndShapesAreErrors) {
  TempDir dir;
  const std::string mean = dir / "mean.binaryproto";
  WriteMean(mean, {1, 3, 2, 2}, std::vector<float>(12, 1));
  TransformationParameter p;
  p.set_mean_file(mean);
  DataTransformer<double> t(p, TEST);
  ExpectErrorContaining([&] { t.OutputShape(1, 2, 2); }, {mean, "3 x 2 x 2", "1 x 2 x 2"});
  ExpectErrorContaining([&] { TransformDatum(&t, MakeDatum(1, 2, 2, {1, 2, 3, 4}, 0)); }, {mean, "3 x 2 x 2", "1 x 2 x 2"});

  TransformationParameter both = p;
  both.add_mean_value(1);
  ExpectErrorContaining([&] { DataTransformer<double> x(both, TEST); }, {"mean_file", "mean_value"});

  TransformationParameter missing;
  missing.set_mean_file(dir / "nope.binaryproto");
  ExpectErrorContaining([&] { DataTransformer<double> x(missing, TEST); }, {dir / "nope.binaryproto"});

  WriteMean(dir / "short.binaryproto", {1, 1, 2, 2}, {1, 2, 3});
  TransformationParameter short_mean;
  short_mean.set_mean_file(dir / "short.binaryproto");
  ExpectErrorContaining([&] { DataTransformer<double> x(short_mean, TEST); }, {dir / "short.binaryproto", "3 values"});

  TransformationParameter two_means;
  two_means.add_mean_value(1);
  two_means.add_mean_value(2);
  DataTransformer<double> t2(two_means, TEST);
  ExpectErrorContaining([&] { t2.OutputShape(3, 2, 2); }, {"2 mean_value", "3 channels"});

  TransformationParameter crop;
  crop.set_crop_size(5);
  DataTransformer<double> t3(crop, TRAIN);
  ExpectErrorContaining([&] { t3.OutputShape(1, 4, 6); }, {"crop_size 5", "1 x 4 x 6"});

  DataTransformer<double> plain(TransformationParameter(), TEST);
  ExpectErrorContaining([&] { TransformDatum(&plain, MakeDatum(1, 2, 2, {1, 2, 3}, 0)); }, {"3 bytes", "needs 4"});
  ExpectErrorContaining([&] { TransformDatum(&plain, MakeDatum(0, 2, 2, {}, 0)); }, {"positive"});
  Datum floats = MakeDatum(1, 1, 3, {}, 0);
  floats.add_float_data(1);
  ExpectErrorContaining([&] { TransformDatum(&plain, floats); }, {"1 float_data", "needs 3"});
}

#ifdef STRATA_USE_OPENCV
TEST(DataTransformer, EncodedImages) {
  // A 2 x 3 BGR image; pixel (y, x) channel k = 10 * (3 * y + x) + k.
  cv::Mat img(2, 3, CV_8UC3);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int k = 0; k < 3; ++k) img.at<cv::Vec3b>(y, x)[k] = static_cast<uint8_t>(10 * (3 * y + x) + k);
  std::vector<uchar> png;
  ASSERT_TRUE(cv::imencode(".png", img, png));
  Datum d;
  d.set_data(std::string(png.begin(), png.end()));
  d.set_encoded(true);
  d.set_label(3);

  DataTransformer<double> native(TransformationParameter(), TEST);
  const auto out = TransformDatum(&native, d);
  ASSERT_EQ(out.size(), 18u);
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[k * 6 + i], 10 * i + k);  // planar: channel k, pixel i

  TransformationParameter gray;
  gray.set_force_gray(true);
  DataTransformer<double> g(gray, TEST);
  EXPECT_EQ(TransformDatum(&g, d).size(), 6u);

  d.set_data("certainly not a png");
  ExpectErrorContaining([&] { TransformDatum(&native, d); }, {"decode"});
}
#else
TEST(DataTransformer, EncodedImagesNeedOpenCV) {
  Datum d;
  d.set_data("\x89PNG");
  d.set_encoded(true);
  DataTransformer<double> t(TransformationParameter(), TEST);
  ExpectErrorContaining([&] { TransformDatum(&t, d); }, {"OpenCV"});
}
#endif

}  // namespace
}  // namespace strata
