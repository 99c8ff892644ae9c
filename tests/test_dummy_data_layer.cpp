// DummyData: shapes (new and legacy fields), constant tops filled once, random tops refilled on every forward
// from the seeded stream, and every bad configuration refused with the layer's name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/layer_factory.hpp"
#include "strata/layers/dummy_data_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Param(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString("name: 'dummy' type: 'DummyData' " + text, &p);
  return p;
}

std::vector<float> Values(const Blob<float>& b) { return {b.cpu_data(), b.cpu_data() + b.count()}; }

TEST(DummyDataLayer, ShapesAndConstantTopsFilledOnce) {
  Blob<float> a, b;
  DummyDataLayer<float> layer(Param(R"(dummy_data_param {
      shape { dim: 2 dim: 3 } shape { dim: 4 }
      data_filler { type: 'constant' value: 7 } data_filler { type: 'constant' value: -1 } })"));
  layer.SetUp({}, {&a, &b});
  EXPECT_EQ(a.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(b.shape(), (std::vector<int>{4}));
  for (float v : Values(a)) EXPECT_EQ(v, 7);
  for (float v : Values(b)) EXPECT_EQ(v, -1);
  // A constant top is not refilled: what a user writes into it stays.
  a.mutable_cpu_data()[0] = 42;
  layer.Forward({}, {&a, &b});
  EXPECT_EQ(a.cpu_data()[0], 42);
  EXPECT_FALSE(layer.IsStochastic());
}

TEST(DummyDataLayer, NoFillerIsZeroAndLegacyDims) {
  Blob<float> a, b;
  DummyDataLayer<float> layer(Param("dummy_data_param { num: 5 num: 2 channels: 3 height: 4 width: 1 width: 2 }"));
  layer.SetUp({}, {&a, &b});
  EXPECT_EQ(a.shape(), (std::vector<int>{5, 3, 4, 1}));
  EXPECT_EQ(b.shape(), (std::vector<int>{2, 3, 4, 2}));
  for (float v : Values(a)) EXPECT_EQ(v, 0);
}

TEST(DummyDataLayer, RandomTopsRefillEveryForwardFromTheSeededStream) {
  auto run = [](unsigned seed) {
    Strata::set_random_seed(seed);
    Blob<float> a, c;
    DummyDataLayer<float> layer(Param(R"(dummy_data_param { shape { dim: 100 } shape { dim: 3 }
        data_filler { type: 'gaussian' std: 2 } data_filler { type: 'constant' value: 1 } })"));
    layer.SetUp({}, {&a, &c});
    EXPECT_TRUE(layer.IsStochastic());
    layer.Forward({}, {&a, &c});
    std::vector<float> first = Values(a);
    layer.Forward({}, {&a, &c});
    EXPECT_NE(first, Values(a)) << "a gaussian top is refilled on every forward";
    double sumsq = 0;
    for (float v : first) sumsq += v * v;
    EXPECT_NEAR(sumsq / 100, 4.0, 2.0) << "std 2";
    for (float v : Values(c)) EXPECT_EQ(v, 1);
    return first;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(DummyDataLayer, BadConfigurationsNameTheLayer) {
  auto error = [](const std::string& text, int tops) {
    std::vector<Blob<float>> blobs(tops);
    std::vector<Blob<float>*> top;
    for (auto& b : blobs) top.push_back(&b);
    try {
      DummyDataLayer<float> layer(Param(text));
      layer.SetUp({}, top);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("dummy_data_param { shape { dim: 1 } shape { dim: 2 } }", 3).find("one shape, or one per top (3)"),
            std::string::npos);
  EXPECT_NE(error("dummy_data_param { shape { dim: 1 } num: 1 channels: 1 height: 1 width: 1 }", 1)
                .find("both shape and num"),
            std::string::npos);
  EXPECT_NE(error("dummy_data_param { num: 1 num: 2 channels: 1 height: 1 width: 1 }", 3).find("num must be given"),
            std::string::npos);
  EXPECT_NE(error("dummy_data_param { shape { dim: 1 } data_filler { type: 'constant' } "
                  "data_filler { type: 'constant' } }", 3)
                .find("'dummy'"),
            std::string::npos);
}

// A net fed by DummyData trains as one fed by Input (the layer is a batch source: the net knows its batch).
TEST(DummyDataLayer, FeedsANet) {
  NetParameter p;
  ReadProtoFromTextString(R"(name: "dummy_net"
    layer { name: "data" type: "DummyData" top: "x" top: "y"
            dummy_data_param { shape { dim: 8 dim: 5 } shape { dim: 8 }
                               data_filler { type: "uniform" min: -1 max: 1 } data_filler { type: "constant" value: 2 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z"
            inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" })",
                          &p);
  Net<float> net(p);
  EXPECT_EQ(net.batch_size(), 8);
  float loss = 0;
  net.Forward(&loss);
  EXPECT_GT(loss, 0);
  net.Backward();
  EXPECT_GT(net.layer_by_name("ip")->blobs()[0]->asum_diff(), 0);
}

}  // namespace
}  // namespace strata
