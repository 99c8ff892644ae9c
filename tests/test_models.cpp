// The reference nets in models/ and the unmodified Caffe files in ../shared/fixtures/caffe: they parse, build,
// run forward and backward, and have the published parameter counts.
#include <dirent.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/net.hpp"
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
