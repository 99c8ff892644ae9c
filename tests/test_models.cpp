// The reference nets in models/ and the unmodified Caffe files in ../shared/fixtures/caffe: they parse, build,
// run forward and backward, and have the published parameter counts.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

const std::string kModels = std::string(STRATA_SOURCE_DIR) + "/models/";
const std::string kFixtures = std::string(STRATA_SOURCE_DIR) + "/../shared/fixtures/caffe/";

std::vector<std::string> ListFiles(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(dir + name);
    }
  }
  closedir(d);
  return out;
}

// Builds the net with a smaller batch so the test stays fast, and returns its learnable value count.
size_t BuildAndCount(const std::string& file, Phase phase, int batch, bool run) {
  NetParameter param;
  ReadNetParamsFromTextFile(file, &param);
  for (auto& layer : *param.mutable_layer()) {
    if (layer.type() != "Input") continue;
    for (auto& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, batch);
  }
  param.mutable_state()->set_phase(phase);
  Net<float> net(param);
  if (run) {
    for (auto* blob : net.input_blobs()) {
      // Valid labels (0) and non-trivial data.
      if (blob->num_axes() == 1) continue;
      rng_uniform<float>(blob->count(), -1.f, 1.f, blob->mutable_cpu_data());
    }
    float loss = 0;
    net.Forward(&loss);
    EXPECT_TRUE(std::isfinite(loss)) << file;
    net.Backward();
  }
  return net.num_learnable_values();
}

TEST(Models, AlexNetParameterCount) {
  EXPECT_EQ(BuildAndCount(kModels + "alexnet/deploy.prototxt", TRAIN, 1, false), 60965224u);
}

TEST(Models, ResNet50ParameterCount) {
  EXPECT_EQ(BuildAndCount(kModels + "resnet50/deploy.prototxt", TRAIN, 1, false), 25557032u);
}

// torchvision's resnet152 has the same 60,192,808 learnable values (its BatchNorm weights are the Scales here).
TEST(Models, ResNet152ParameterCount) {
  EXPECT_EQ(BuildAndCount(kModels + "resnet152/deploy.prototxt", TRAIN, 1, false), 60192808u);
}

TEST(Models, SmallModelsRunForwardBackward) {
  for (const char* m : {"lenet", "cifar10_quick"}) {
    for (Phase phase : {TRAIN, TEST}) BuildAndCount(kModels + m + "/deploy.prototxt", phase, 2, true);
  }
  // LeNet: 20*25+20 + 50*20*25+50 + 500*800+500 + 10*500+10
  EXPECT_EQ(BuildAndCount(kModels + "lenet/deploy.prototxt", TRAIN, 1, false), 431080u);
}

TEST(Models, GoogLeNetBuilds) {
  // bvlc_googlenet without the auxiliary classifiers.
  EXPECT_EQ(BuildAndCount(kModels + "googlenet/deploy.prototxt", TEST, 1, false), 6998552u);
}

// FCN-8s: VGG-16 (14,714,688) + fc6 (102,764,544) + fc7 (16,781,312) + the score layers (86,037 + 10,773 +
// 5,397) + the grouped upsamplings (336 + 336 + 5,376).
TEST(Models, FCN8sParameterCount) {
  EXPECT_EQ(BuildAndCount(kModels + "fcn8s/deploy.prototxt", TRAIN, 1, false), 134368799u);
}

// FCN-8s trains on generated segmentation data: 32 x 32 images of coloured rectangles on a dark background
// (the 100-pixel pad leaves every Deconvolution and Crop a valid window even at this size), per-pixel labels
// with an ignored border, a few SGD steps on one batch. The loss starts at ln(21) per counted pixel (the score
// layers start at zero) and must fall.
TEST(Models, FCN8sTrainsOnGeneratedSegmentation) {
  const int size = 32, batch = 1;
  SolverParameter solver;
  ReadProtoFromTextString("type: 'SGD' base_lr: 5e-8 momentum: 0.9 lr_policy: 'fixed' max_iter: 4 "
                          "snapshot_after_train: false random_seed: 7", &solver);
  ReadNetParamsFromTextFile(kModels + "fcn8s/deploy.prototxt", solver.mutable_net_param());
  for (auto& shape : *solver.mutable_net_param()->mutable_layer(0)->mutable_input_param()->mutable_shape()) {
    shape.set_dim(0, batch);
    shape.set_dim(2, size);
    shape.set_dim(3, size);
  }
  auto sgd = SolverRegistry<float>::Create(solver);
  Net<float>* net = sgd->net();
  ASSERT_EQ(net->blob_by_name("score")->shape(), (std::vector<int>{batch, 21, size, size}));

  float* image = net->blob_by_name("data")->mutable_cpu_data();
  float* label = net->blob_by_name("label")->mutable_cpu_data();
  std::mt19937 rng(3);
  int counted = 0;
  for (int n = 0; n < batch; ++n) {
    std::fill(label + n * size * size, label + (n + 1) * size * size, 0.f);
    for (int r = 0; r < 3; ++r) {
      const int cls = 1 + static_cast<int>(rng() % 20), y0 = rng() % 20, x0 = rng() % 20, h = 6 + rng() % 10,
                w = 6 + rng() % 10;
      for (int y = y0; y < std::min(size, y0 + h); ++y) {
        for (int x = x0; x < std::min(size, x0 + w); ++x) label[(n * size + y) * size + x] = cls;
      }
    }
    for (int y = 0; y < size; ++y) {
      for (int x = 0; x < size; ++x) {
        float& l = label[(n * size + y) * size + x];
        if (y == 0 || x == 0 || y == size - 1 || x == size - 1) l = 255;  // FCN's "void" border
        counted += l != 255;
        for (int c = 0; c < 3; ++c) {
          // Each class its own colour, plus noise.
          const float colour = l == 255 ? 0.f : 40.f * (((static_cast<int>(l) * (c + 3)) % 7) - 3);
          image[((n * 3 + c) * size + y) * size + x] = colour + std::uniform_real_distribution<float>(-8, 8)(rng);
        }
      }
    }
  }
  std::vector<float> losses;
  for (int i = 0; i < 4; ++i) {
    sgd->Step(1);
    losses.push_back(sgd->smoothed_loss());
  }
  // normalize: false is Caffe's BATCH_SIZE normalisation: the sum over pixels divided by the batch.
  EXPECT_NEAR(losses.front(), counted * std::log(21.0) / batch, 1e-3 * counted);
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "losses " << ::testing::PrintToString(losses);
}

TEST(CaffeFixtures, EveryFileParses) {
  const auto files = ListFiles(kFixtures, ".prototxt");
  if (files.empty()) GTEST_SKIP() << "no fixtures at " << kFixtures;
  for (const auto& f : files) {
    if (f.find("solver") != std::string::npos) {
      SolverParameter solver;
      EXPECT_NO_THROW(ReadSolverParamsFromTextFile(f, &solver)) << f;
    } else {
      NetParameter net;
      EXPECT_NO_THROW(ReadNetParamsFromTextFile(f, &net)) << f;
      EXPECT_GT(net.layer_size(), 0) << f;
    }
  }
}

TEST(CaffeFixtures, DeployNetsBuild) {
  const auto files = ListFiles(kFixtures, "_deploy.prototxt");
  if (files.empty()) GTEST_SKIP() << "no fixtures at " << kFixtures;
  for (const auto& f : files) {
    EXPECT_NO_THROW(BuildAndCount(f, TEST, 1, false)) << f;
  }
}

}  // namespace
}  // namespace strata
