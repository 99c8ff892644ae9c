#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/layers/memory_data_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;

LayerParameter MemoryParam(int batch, int channels, int height, int width) {
  LayerParameter p;
  p.set_name("mem");
  p.set_type("MemoryData");
  p.add_top("data");
  p.add_top("label");
  MemoryDataParameter* mp = p.mutable_memory_data_param();
  mp->set_batch_size(batch);
  mp->set_channels(channels);
  mp->set_height(height);
  mp->set_width(width);
  return p;
}

struct MemoryUnderTest {
  explicit MemoryUnderTest(const LayerParameter& p) : layer(p) { layer.SetUp({}, tops()); }
  std::vector<Blob<double>*> tops() { return {&data, &label}; }
  void Forward() { layer.Forward({}, tops()); }
  std::vector<double> Data() const { return {data.cpu_data(), data.cpu_data() + data.count()}; }
  std::vector<double> Labels() const { return {label.cpu_data(), label.cpu_data() + label.count()}; }
  MemoryDataLayer<double> layer;
  Blob<double> data, label;
};

TEST(MemoryDataLayer, HandsOutBatchesAndWrapsRound) {
  MemoryUnderTest m(MemoryParam(2, 1, 1, 3));
  EXPECT_EQ(m.data.shape(), (std::vector<int>{2, 1, 1, 3}));
  EXPECT_EQ(m.label.shape(), (std::vector<int>{2}));
  // 4 examples of 3 values: example k holds 10k, 10k + 1, 10k + 2 and label k.
  std::vector<double> data, labels;
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 3; ++j) data.push_back(10 * k + j);
    labels.push_back(k);
  }
  m.layer.Reset(data.data(), labels.data(), 4);
  m.Forward();
  EXPECT_EQ(m.Data(), (std::vector<double>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(m.Labels(), (std::vector<double>{0, 1}));
  m.Forward();
  EXPECT_EQ(m.Data(), (std::vector<double>{20, 21, 22, 30, 31, 32}));
  EXPECT_EQ(m.Labels(), (std::vector<double>{2, 3}));
  m.Forward();  // wrapped
  EXPECT_EQ(m.Labels(), (std::vector<double>{0, 1}));
  // A new Reset starts at its first example.
  m.Forward();
  m.layer.Reset(data.data() + 6, labels.data() + 2, 2);
  m.Forward();
  EXPECT_EQ(m.Labels(), (std::vector<double>{2, 3}));
  m.Forward();
  EXPECT_EQ(m.Labels(), (std::vector<double>{2, 3}));
}

TEST(MemoryDataLayer, ChangesBatchSizeOnceTheDataIsConsumed) {
  MemoryUnderTest m(MemoryParam(2, 1, 1, 1));
  std::vector<double> data{0, 1, 2, 3}, labels{5, 6, 7, 8};
  m.layer.Reset(data.data(), labels.data(), 4);
  ExpectErrorContaining([&] { m.layer.set_batch_size(4); }, {"consumed"});
  m.Forward();
  ExpectErrorContaining([&] { m.layer.set_batch_size(3); }, {"does not divide"});
  m.layer.set_batch_size(4);
  m.Forward();
  EXPECT_EQ(m.data.shape(), (std::vector<int>{4, 1, 1, 1}));
  EXPECT_EQ(m.Labels(), labels);
}

TEST(MemoryDataLayer, RefusesBadUse) {
  MemoryUnderTest m(MemoryParam(2, 1, 2, 2));
  ExpectErrorContaining([&] { m.Forward(); }, {"layer 'mem' (MemoryData)", "Reset"});
  std::vector<double> data(12), labels(3);
  ExpectErrorContaining([&] { m.layer.Reset(data.data(), labels.data(), 3); }, {"3 examples", "batch size 2"});
  ExpectErrorContaining([&] { m.layer.Reset(nullptr, labels.data(), 2); }, {"data and labels"});
  for (int bad = 0; bad < 4; ++bad) {
    LayerParameter p = MemoryParam(2, 1, 2, 2);
    MemoryDataParameter* mp = p.mutable_memory_data_param();
    if (bad == 0) mp->clear_batch_size();
    if (bad == 1) mp->set_channels(0);
    if (bad == 2) mp->clear_height();
    if (bad == 3) mp->set_width(0);
    ExpectErrorContaining([&] { MemoryUnderTest b(p); }, {"memory_data_param", "positive"});
  }
}

TEST(MemoryDataLayer, FeedsANet) {
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'mem' type: 'MemoryData' top: 'data' top: 'label' "
      "  memory_data_param { batch_size: 2 channels: 1 height: 1 width: 2 } }",
      &param);
  Net<float> net(param);
  EXPECT_TRUE(net.layer_by_name("mem")->IsBatchSource());
  auto* mem = dynamic_cast<MemoryDataLayer<float>*>(net.layer_by_name("mem").get());
  ASSERT_NE(mem, nullptr);
  std::vector<float> data{1, 2, 3, 4, 5, 6, 7, 8}, labels{0, 1, 2, 3};
  mem->Reset(data.data(), labels.data(), 4);
  net.Forward();
  net.Forward();
  const auto& d = *net.blob_by_name("data");
  ASSERT_EQ(d.shape(), (std::vector<int>{2, 1, 1, 2}));
  EXPECT_EQ(d.cpu_data()[0], 5);
  EXPECT_EQ(net.blob_by_name("label")->cpu_data()[1], 3);
}

}  // namespace
}  // namespace strata
