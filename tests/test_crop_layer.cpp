#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/crop_layer.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

LayerParameter Crop(const std::string& crop_param = "") {
  LayerParameter p;
  ReadProtoFromTextString("name: \"crop\" type: \"Crop\" crop_param { " + crop_param + " }", &p);
  return p;
}

void FillIota(Blob<double>* b) {
  for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = i;
}

TEST(CropLayer, HandWorkedDefaultAxis) {
  // N and C are kept (axis 2); rows 1..2 and columns 1..3 of the 4 x 5 image 0..19.
  Blob<double> x({1, 1, 4, 5}), ref({7, 9, 2, 3}), y;
  FillIota(&x);
  CropLayer<double> layer(Crop("offset: 1"));
  layer.SetUp({&x, &ref}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 2, 3}));
  EXPECT_EQ(layer.offsets(), (std::vector<int>{0, 0, 1, 1}));
  layer.Forward({&x, &ref}, {&y});
  ExpectValues(y.cpu_data(), {6, 7, 8, 11, 12, 13});

  // Backward: the top gradient lands in the window, zero elsewhere (over a stale bottom gradient).
  for (int i = 0; i < 6; ++i) y.mutable_cpu_diff()[i] = i + 1;
  cpu_set(x.count(), 9.0, x.mutable_cpu_diff());
  layer.Backward({&y}, {true, false}, {&x, &ref});
  ExpectValues(x.cpu_diff(), {0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 0});
}

TEST(CropLayer, NoOffsetStartsAtZero) {
  Blob<double> x({1, 1, 3, 3}), ref({1, 1, 2, 2}), y;
  FillIota(&x);
  CropLayer<double> layer(Crop());
  layer.SetUp({&x, &ref}, {&y});
  layer.Forward({&x, &ref}, {&y});
  ExpectValues(y.cpu_data(), {0, 1, 3, 4});
}

// Every top element against the index arithmetic, for per-axis and single offsets on several axes.
void CheckCrop(const std::string& crop_param, const std::vector<int>& x_shape, const std::vector<int>& ref_shape,
               const std::vector<int>& expected_shape, const std::vector<int>& expected_offsets) {
  SCOPED_TRACE(crop_param);
  Blob<double> x(x_shape), ref(ref_shape), y;
  FillIota(&x);
  CropLayer<double> layer(Crop(crop_param));
  layer.SetUp({&x, &ref}, {&y});
  ASSERT_EQ(y.shape(), expected_shape);
  ASSERT_EQ(layer.offsets(), expected_offsets);
  layer.Forward({&x, &ref}, {&y});
  std::vector<int> index(y.num_axes(), 0);
  for (int i = 0; i < y.count(); ++i) {
    int rest = i;
    for (int k = y.num_axes() - 1; k >= 0; --k) {
      index[k] = rest % y.shape(k) + expected_offsets[k];
      rest /= y.shape(k);
    }
    ASSERT_EQ(y.cpu_data()[i], x.data_at(index)) << "top element " << i;
  }
}

TEST(CropLayer, AxesAndOffsets) {
  CheckCrop("axis: 1 offset: 1 offset: 0 offset: 2", {2, 3, 4, 5}, {2, 2, 3, 3}, {2, 2, 3, 3}, {0, 1, 0, 2});
  CheckCrop("axis: 0 offset: 1", {3, 3, 4, 5}, {2, 2, 2, 2}, {2, 2, 2, 2}, {1, 1, 1, 1});
  CheckCrop("axis: -1 offset: 3", {2, 3, 4, 5}, {1, 1, 1, 2}, {2, 3, 4, 2}, {0, 0, 0, 3});
  CheckCrop("axis: 2 offset: 0 offset: 2", {2, 3, 4, 5}, {1, 1, 4, 3, 8}, {2, 3, 4, 3}, {0, 0, 0, 2});
  CheckCrop("axis: 1", {2, 3, 4}, {2, 3, 4}, {2, 3, 4}, {0, 0, 0});  // the identity
}

TEST(CropLayer, Gradient) {
  Blob<double> x({2, 3, 5, 4}), ref({1, 2, 3, 2}), y;
  FillUniform(&x, -1.0, 1.0);
  CropLayer<double> layer(Crop("axis: 1 offset: 1 offset: 2 offset: 1"));
  GradientChecker<double> checker(1e-4, 1e-6);
  checker.CheckGradient(&layer, {&x, &ref}, {&y}, 0);
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 2, 3, 2}));
}

TEST(CropLayer, ReferenceGetsZeroGradient) {
  // The reference gives only its shape: asked for, its gradient is zero.
  Blob<double> x({1, 2, 4, 4}), ref({1, 2, 2, 2}), y;
  FillUniform(&x, -1.0, 1.0);
  FillUniform(&ref, -1.0, 1.0, 2);
  CropLayer<double> layer(Crop("offset: 1"));
  layer.SetUp({&x, &ref}, {&y});
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward({&x, &ref}, {&y});
  cpu_set(y.count(), 1.0, y.mutable_cpu_diff());
  cpu_set(ref.count(), 5.0, ref.mutable_cpu_diff());
  layer.Backward({&y}, {false, true}, {&x, &ref});
  for (int i = 0; i < ref.count(); ++i) EXPECT_EQ(ref.cpu_diff()[i], 0.0);
}

TEST(CropLayer, ReshapeFollowsTheReference) {
  Blob<double> x({1, 1, 6, 6}), ref({1, 1, 2, 2}), y;
  FillIota(&x);
  CropLayer<double> layer(Crop("offset: 2"));
  layer.SetUp({&x, &ref}, {&y});
  ref.Reshape({1, 1, 3, 4});
  layer.Forward({&x, &ref}, {&y});
  ASSERT_EQ(y.shape(), (std::vector<int>{1, 1, 3, 4}));
  ExpectValues(y.cpu_data(), {14, 15, 16, 17, 20, 21, 22, 23, 26, 27, 28, 29});
  ref.Reshape({1, 1, 5, 4});  // 2 + 5 > 6: no longer fits
  EXPECT_THROW(layer.Reshape({&x, &ref}, {&y}), Error);
}

TEST(CropLayer, BadConfigurationsAreRefused) {
  auto setup = [](const std::string& crop_param, const std::vector<int>& x_shape, const std::vector<int>& ref_shape) {
    Blob<float> x(x_shape), ref(ref_shape), y;
    auto layer = LayerRegistry<float>::CreateLayer(Crop(crop_param));
    layer->SetUp({&x, &ref}, {&y});
  };
  EXPECT_NO_THROW(setup("offset: 1", {1, 2, 4, 4}, {1, 2, 3, 3}));
  EXPECT_THROW(setup("", {1, 2, 4, 4}, {1, 2, 5, 3}), Error);                      // the crop is larger
  EXPECT_THROW(setup("offset: 2", {1, 2, 4, 4}, {1, 2, 3, 3}), Error);             // 2 + 3 > 4
  EXPECT_THROW(setup("offset: 0 offset: 2", {1, 2, 4, 4}, {1, 2, 3, 3}), Error);   // the same, per axis
  EXPECT_THROW(setup("offset: 1 offset: 1 offset: 1", {1, 2, 4, 4}, {1, 2, 3, 3}), Error);  // 3 offsets, 2 axes
  EXPECT_THROW(setup("axis: 4", {1, 2, 4, 4}, {1, 2, 3, 3}), Error);               // no such axis
  EXPECT_THROW(setup("axis: -5", {1, 2, 4, 4}, {1, 2, 3, 3}), Error);
  EXPECT_THROW(setup("", {1, 2, 4, 4}, {1, 2, 3}), Error);                         // the reference lacks an axis
  Blob<float> x({1, 2, 4, 4}), y;
  auto layer = LayerRegistry<float>::CreateLayer(Crop());
  EXPECT_THROW(layer->SetUp({&x}, {&y}), Error);  // one bottom
}

}  // namespace
}  // namespace strata
