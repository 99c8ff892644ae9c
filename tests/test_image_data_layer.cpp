#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/layers/image_data_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

#ifdef STRATA_USE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::TempDir;
using testing_data::WriteFile;

LayerParameter ImageDataParam(const std::string& source, const std::string& root, int batch) {
  LayerParameter p;
  p.set_name("images");
  p.set_type("ImageData");
  p.set_phase(TRAIN);
  p.add_top("data");
  p.add_top("label");
  p.mutable_image_data_param()->set_source(source);
  p.mutable_image_data_param()->set_root_folder(root);
  p.mutable_image_data_param()->set_batch_size(batch);
  return p;
}

TEST(ImageDataLayer, ReadsTheListFormat) {
  TempDir dir;
  WriteFile(dir / "list.txt", "a.png 1\n\n  sub dir/b.png\t-2 \r\nc 3.png 30\n");
  const std::vector<ImageListEntry> entries = ReadImageList(dir / "list.txt");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].path, "a.png");
  EXPECT_EQ(entries[1].path, "sub dir/b.png");
  EXPECT_EQ(entries[1].label, -2);
  EXPECT_EQ(entries[1].line, 3);
  EXPECT_EQ(entries[2].path, "c 3.png");
  EXPECT_EQ(entries[2].label, 30);
  WriteFile(dir / "bad.txt", "a.png 1\nb.png x\n");
  ExpectErrorContaining([&] { ReadImageList(dir / "bad.txt"); }, {dir / "bad.txt", ":2", "'x'"});
  WriteFile(dir / "nolabel.txt", "a.png\n");
  ExpectErrorContaining([&] { ReadImageList(dir / "nolabel.txt"); }, {"nolabel.txt:1", "path label"});
  ExpectErrorContaining([&] { ReadImageList(dir / "missing.txt"); }, {"missing.txt", "cannot open"});
}

#ifdef STRATA_USE_OPENCV


// n images img<i>.png of 2 x 3 pixels, every pixel BGR = (10i, 10i + 1, 10i + 2), listed with label i in
// dir/list.txt (paths relative to dir/imgs/).
void WriteImages(const TempDir& dir, int n) {
  std::filesystem::create_directories(dir / "imgs");
  std::string list;
  for (int i = 0; i < n; ++i) {
    const cv::Mat img(2, 3, CV_8UC3, cv::Scalar(10 * i, 10 * i + 1, 10 * i + 2));
    const std::string name = "img" + std::to_string(i) + ".png";
    ASSERT_TRUE(cv::imwrite(dir / ("imgs/" + name), img));
    list += name + " " + std::to_string(i) + "\n";
  }
  WriteFile(dir / "list.txt", list);
}

// A layer set up with its two tops, seeded so that runs repeat.
struct ImagesUnderTest {
  explicit ImagesUnderTest(const LayerParameter& p, uint64_t seed = 1, int rank = 0, int count = 1)
      : layer(new ImageDataLayer<double>(p)) {
    layer->set_data_shard({rank, count});
    Strata::set_random_seed(seed);
    layer->SetUp({}, tops());
  }
  std::vector<Blob<double>*> tops() { return {&data, &label}; }
  void Forward() { layer->Forward({}, tops()); }
  std::vector<double> Labels() { return std::vector<double>(label.cpu_data(), label.cpu_data() + label.count()); }
  // One Forward; returns the data values followed by the labels.
  std::vector<double> Next() {
    Forward();
    std::vector<double> v(data.cpu_data(), data.cpu_data() + data.count());
    const std::vector<double> l = Labels();
    v.insert(v.end(), l.begin(), l.end());
    return v;
  }
  Blob<double> data, label;
  std::unique_ptr<ImageDataLayer<double>> layer;
};

TEST(ImageDataLayer, BatchesInListOrderAndWrapsRound) {
  TempDir dir;
  WriteImages(dir, 5);
  LayerParameter p = ImageDataParam(dir / "list.txt", dir / "imgs/", 3);
  p.mutable_transform_param()->set_scale(0.5);
  ImagesUnderTest d(p);
  EXPECT_EQ(d.data.shape(), (std::vector<int>{3, 3, 2, 3}));
  EXPECT_EQ(d.label.shape(), (std::vector<int>{3}));
  EXPECT_EQ(d.layer->num_images(), 5u);
  const int expected[4][3] = {{0, 1, 2}, {3, 4, 0}, {1, 2, 3}, {4, 0, 1}};
  for (int t = 0; t < 4; ++t) {
    d.Forward();
    for (int i = 0; i < 3; ++i) {
      const int k = expected[t][i];
      EXPECT_EQ(d.label.cpu_data()[i], k) << "batch " << t << " item " << i;
      for (int c = 0; c < 3; ++c)
        for (int j = 0; j < 6; ++j) EXPECT_EQ(d.data.cpu_data()[(i * 3 + c) * 6 + j], 0.5 * (10 * k + c));
    }
    EXPECT_EQ(d.layer->position(), 3u * (t + 1));
  }
}

TEST(ImageDataLayer, ResizesAndReadsGray) {
  TempDir dir;
  WriteImages(dir, 3);
  LayerParameter p = ImageDataParam(dir / "list.txt", dir / "imgs/", 2);
  p.mutable_image_data_param()->set_new_height(4);
  p.mutable_image_data_param()->set_new_width(5);
  {
    ImagesUnderTest d(p);
    EXPECT_EQ(d.data.shape(), (std::vector<int>{2, 3, 4, 5}));
    d.Forward();
    for (int j = 0; j < 20; ++j) EXPECT_EQ(d.data.cpu_data()[(1 * 3 + 2) * 20 + j], 12);  // image 1, channel R
  }
  p.mutable_image_data_param()->set_is_color(false);
  ImagesUnderTest g(p);
  EXPECT_EQ(g.data.shape(), (std::vector<int>{2, 1, 4, 5}));
  g.Forward();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 20; ++j) {
      const double v = g.data.cpu_data()[i * 20 + j];
      EXPECT_GE(v, 10 * i);  // the gray of (10i, 10i+1, 10i+2)
      EXPECT_LE(v, 10 * i + 2);
    }
  EXPECT_EQ(g.Labels(), (std::vector<double>{0, 1}));

  p.mutable_image_data_param()->set_new_width(0);
  ExpectErrorContaining([&] { ImagesUnderTest bad(p); }, {"new_height", "new_width"});
}

TEST(ImageDataLayer, ShuffleRepeatsWithTheSeedAndCoversEveryEpoch) {
  TempDir dir;
  const int n = 8;
  WriteImages(dir, n);
  LayerParameter p = ImageDataParam(dir / "list.txt", dir / "imgs/", n);  // one batch = one epoch
  p.mutable_image_data_param()->set_shuffle(true);
  const auto epochs = [&](uint64_t seed) {
    ImagesUnderTest d(p, seed);
    std::vector<std::vector<double>> run;
    for (int t = 0; t < 3; ++t) {
      d.Forward();
      run.push_back(d.Labels());
    }
    return run;
  };
  const auto a = epochs(5), b = epochs(5), c = epochs(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<double> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  for (const auto& epoch : a) {
    std::vector<double> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all);  // a permutation of the list
  }
  EXPECT_NE(a[0], all);  // shuffled at start, as Caffe
  EXPECT_NE(a[0], a[1]);  // and again at the epoch's end
}

TEST(ImageDataLayer, RanksConcatenateToTheSingleRankBatch) {
  TempDir dir;
  WriteImages(dir, 7);
  LayerParameter single_p = ImageDataParam(dir / "list.txt", dir / "imgs/", 4);
  single_p.mutable_image_data_param()->set_shuffle(true);
  single_p.mutable_transform_param()->set_mirror(true);
  single_p.mutable_transform_param()->set_crop_size(2);
  ImagesUnderTest single(single_p, 42);
  LayerParameter rank_p = single_p;
  rank_p.mutable_image_data_param()->set_batch_size(2);
  std::vector<std::unique_ptr<ImagesUnderTest>> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back(new ImagesUnderTest(rank_p, 42, r, 2));
  EXPECT_EQ(ranks[1]->layer->data_shard().index, 1);
  EXPECT_EQ(ranks[1]->layer->data_shard().count, 2);
  const int item = 3 * 2 * 2;
  for (int t = 0; t < 6; ++t) {  // several epochs of 7 images
    const std::vector<double> whole = single.Next();
    std::vector<double> data, labels;
    for (auto& r : ranks) {
      const std::vector<double> part = r->Next();
      data.insert(data.end(), part.begin(), part.begin() + 2 * item);
      labels.insert(labels.end(), part.begin() + 2 * item, part.end());
      EXPECT_EQ(r->layer->position(), single.layer->position());
    }
    data.insert(data.end(), labels.begin(), labels.end());
    ASSERT_EQ(data, whole) << "iteration " << t;
  }
}

TEST(ImageDataLayer, ResumesAtAPosition) {
  TempDir dir;
  WriteImages(dir, 5);
  LayerParameter p = ImageDataParam(dir / "list.txt", dir / "imgs/", 2);
  p.mutable_image_data_param()->set_shuffle(true);
  ImagesUnderTest a(p, 3);
  std::vector<std::vector<double>> run;
  for (int t = 0; t < 5; ++t) run.push_back(a.Next());
  ImagesUnderTest b(p, 3);
  b.layer->set_position(4);
  for (int t = 2; t < 5; ++t) EXPECT_EQ(b.Next(), run[t]) << "iteration " << t;
}

TEST(ImageDataLayer, UnreadableImagesAndEmptyListsAreErrors) {
  TempDir dir;
  WriteImages(dir, 2);
  WriteFile(dir / "missing.txt", "img0.png 0\nimg1.png 1\nnope.png 2\n");
  {
    ImagesUnderTest d(ImageDataParam(dir / "missing.txt", dir / "imgs/", 2));
    d.Forward();
    ExpectErrorContaining([&] { d.Forward(); }, {"layer 'images' (ImageData)", dir / "imgs/nope.png",
                                                 dir / "missing.txt:3"});
    ExpectErrorContaining([&] { d.Forward(); }, {"nope.png"});  // and stays failed
  }
  WriteFile(dir / "first.txt", "\nnope.png 2\nimg0.png 0\n");
  ExpectErrorContaining([&] { ImagesUnderTest d(ImageDataParam(dir / "first.txt", dir / "imgs/", 1)); },
                        {"nope.png", "first.txt:2"});
  WriteFile(dir / "empty.txt", "\n  \n");
  ExpectErrorContaining([&] { ImagesUnderTest d(ImageDataParam(dir / "empty.txt", dir / "imgs/", 1)); },
                        {"empty.txt", "names no images"});
  // Images of different sizes without new_height/new_width.
  ASSERT_TRUE(cv::imwrite(dir / "imgs/big.png", cv::Mat(4, 4, CV_8UC3, cv::Scalar(0, 0, 0))));
  WriteFile(dir / "sizes.txt", "img0.png 0\nbig.png 1\n");
  {
    ImagesUnderTest d(ImageDataParam(dir / "sizes.txt", dir / "imgs/", 2));
    ExpectErrorContaining([&] { d.Forward(); }, {"big.png", "sizes.txt:2", "3 x 4 x 4", "new_height"});
  }
  LayerParameter p = ImageDataParam(dir / "list.txt", dir / "imgs/", 0);
  ExpectErrorContaining([&] { ImagesUnderTest d(p); }, {"batch_size"});
}

TEST(ImageDataLayer, RunsInsideANet) {
  TempDir dir;
  WriteImages(dir, 3);
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'images' type: 'ImageData' top: 'data' top: 'label' "
      "  image_data_param { source: '" + dir / "list.txt" + "' root_folder: '" + dir / "imgs/" +
          "' batch_size: 2 new_height: 3 new_width: 3 } "
      "  transform_param { scale: 2 } }",
      &param);
  Net<float> net(param);
  EXPECT_TRUE(net.layer_by_name("images")->IsBatchSource());
  EXPECT_EQ(net.batch_size(), 2);
  net.Forward();
  const auto& data = *net.blob_by_name("data");
  const auto& label = *net.blob_by_name("label");
  ASSERT_EQ(data.shape(), (std::vector<int>{2, 3, 3, 3}));
  EXPECT_EQ(label.cpu_data()[1], 1);
  EXPECT_EQ(data.cpu_data()[27 + 9], 22);  // image 1, channel G (11) * scale 2
  net.Forward();
  EXPECT_EQ(label.cpu_data()[0], 2);
  EXPECT_EQ(label.cpu_data()[1], 0);  // wrapped
}

#else  // !STRATA_USE_OPENCV

TEST(ImageDataLayer, RefusesWithoutOpenCV) {
  TempDir dir;
  WriteFile(dir / "list.txt", "a.png 0\n");
  ImageDataLayer<float> layer(ImageDataParam(dir / "list.txt", dir / "", 1));
  Blob<float> data, label;
  ExpectErrorContaining([&] { layer.SetUp({}, {&data, &label}); }, {"ImageData", "OpenCV"});
}

#endif  // STRATA_USE_OPENCV

}  // namespace
}  // namespace strata
