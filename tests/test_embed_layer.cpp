#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/embed_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Embed(const std::string& embed_param) {
  LayerParameter p;
  ReadProtoFromTextString("name: \"embed\" type: \"Embed\" embed_param { " + embed_param + " }", &p);
  return p;
}

TEST(EmbedLayer, HandWorked) {
  // Rows [1, 2], [3, 4], [5, 6] and bias [0.5, -1]; indices [[2, 0], [1, 2]].
  Blob<double> x({2, 2}), y;
  SetValues(&x, {2, 0, 1, 2});
  EmbedLayer<double> layer(Embed("num_output: 2 input_dim: 3"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{3, 2}));
  ASSERT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{2}));
  SetValues(layer.blobs()[0].get(), {1, 2, 3, 4, 5, 6});
  SetValues(layer.blobs()[1].get(), {0.5, -1});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{2, 2, 2}));
  ExpectValues(y.cpu_data(), {5.5, 5, 1.5, 1, 3.5, 3, 5.5, 5});

  // Each row used gathers its lookups' gradients (row 2 twice, row 0 and 1 once); the bias all of them.
  for (int i = 0; i < 8; ++i) y.mutable_cpu_diff()[i] = i + 1;
  for (auto& b : layer.blobs()) cpu_set(b->count(), 0.0, b->mutable_cpu_diff());
  layer.Backward({&y}, {false}, {&x});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {3, 4, 5, 6, 1 + 7, 2 + 8});
  ExpectValues(layer.blobs()[1]->cpu_diff(), {1 + 3 + 5 + 7, 2 + 4 + 6 + 8});
}

TEST(EmbedLayer, NoBiasAndDefaults) {
  Blob<float> x({4}), y;
  for (int i = 0; i < 4; ++i) x.mutable_cpu_data()[i] = 3 - i;
  EmbedLayer<float> layer(Embed("num_output: 3 input_dim: 4 bias_term: false "
                                "weight_filler { type: \"uniform\" min: -1 max: 1 }"));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 1u);
  EXPECT_FALSE(layer.AllowForceBackward(0));
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{4, 3}));
  for (int m = 0; m < 4; ++m) {
    for (int d = 0; d < 3; ++d) EXPECT_EQ(y.cpu_data()[m * 3 + d], layer.blobs()[0]->cpu_data()[(3 - m) * 3 + d]);
  }
}

TEST(EmbedLayer, ParameterGradients) {
  Blob<double> x({3, 4}), y;
  for (int i = 0; i < 12; ++i) x.mutable_cpu_data()[i] = (i * 7) % 5;  // repeated indices
  EmbedLayer<double> layer(Embed("num_output: 3 input_dim: 5 weight_filler { type: \"uniform\" min: -1 max: 1 } "
                                 "bias_filler { type: \"uniform\" min: -1 max: 1 }"));
  GradientChecker<double> checker(1e-4, 1e-6);
  // Bottom 1 does not exist: no bottom is checked (the indices have no gradient), only the weights and bias.
  checker.CheckGradient(&layer, {&x}, {&y}, 1);
  EXPECT_EQ(checker.last_num_checked(), 5 * 3 + 3);
}

TEST(EmbedLayer, BadIndicesAreRefused) {
  auto forward = [](double index) {
    Blob<double> x({2}), y;
    x.mutable_cpu_data()[0] = 1;
    x.mutable_cpu_data()[1] = index;
    EmbedLayer<double> layer(Embed("num_output: 2 input_dim: 3"));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
  };
  EXPECT_NO_THROW(forward(2));
  EXPECT_NO_THROW(forward(0));
  EXPECT_THROW(forward(3), Error);  // == input_dim
  EXPECT_THROW(forward(-1), Error);
  EXPECT_THROW(forward(1.5), Error);  // not an integer
  EXPECT_THROW(forward(std::numeric_limits<double>::quiet_NaN()), Error);
  EXPECT_THROW(forward(1e12), Error);
  try {
    forward(7);
    ADD_FAILURE() << "index 7 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 3)"), std::string::npos) << e.what();
  }
}

TEST(EmbedLayer, BadConfigurationsAreRefused) {
  auto setup = [](const std::string& embed_param) {
    Blob<float> x({2}), y;
    auto layer = LayerRegistry<float>::CreateLayer(Embed(embed_param));
    layer->SetUp({&x}, {&y});
  };
  EXPECT_NO_THROW(setup("num_output: 2 input_dim: 3"));
  EXPECT_THROW(setup("input_dim: 3"), Error);   // num_output 0
  EXPECT_THROW(setup("num_output: 2"), Error);  // input_dim 0

  // Weights that came with the layer must be input_dim x num_output.
  Blob<float> x({2}), y;
  EmbedLayer<float> wrong(Embed("num_output: 2 input_dim: 3"));
  wrong.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{2, 3}));
  wrong.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{2}));
  EXPECT_THROW(wrong.SetUp({&x}, {&y}), Error);

  // No gradient for the indices.
  x.mutable_cpu_data()[0] = 2;
  x.mutable_cpu_data()[1] = 0;
  EmbedLayer<float> layer(Embed("num_output: 2 input_dim: 3"));
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  EXPECT_THROW(layer.Backward({&y}, {true}, {&x}), Error);
}

}  // namespace
}  // namespace strata
