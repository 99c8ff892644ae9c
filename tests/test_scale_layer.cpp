#include <gtest/gtest.h>

#include "blob_values.hpp"
#include "gradient_checker.hpp"
#include "strata/layers/scale_layer.hpp"

namespace strata {
namespace {

// Random fillers (so gradient checks see non-trivial parameters) unless `default_fillers`.
LayerParameter ScaleParam(int axis, int num_axes, bool bias, bool default_fillers = false) {
  LayerParameter p;
  p.set_name("scale");
  p.set_type("Scale");
  ScaleParameter* s = p.mutable_scale_param();
  s->set_axis(axis);
  s->set_num_axes(num_axes);
  s->set_bias_term(bias);
  if (!default_fillers) {
    s->mutable_filler()->set_type("uniform");
    s->mutable_filler()->set_min(-2);
    s->mutable_filler()->set_max(2);
    s->mutable_bias_filler()->set_type("uniform");
    s->mutable_bias_filler()->set_min(-1);
  }
  return p;
}

TEST(ScaleLayer, HandWorkedLearnedScaleAndBias) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, 2, 3, 4, 5, 6});
  ScaleLayer<double> layer(ScaleParam(1, 1, true));
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 2u);
  SetValues(layer.blobs()[0].get(), {2, -1, 0.5});
  SetValues(layer.blobs()[1].get(), {1, 2, 3});
  layer.Forward({&x}, {&y});
  ExpectValues(y.cpu_data(), {3, 0, 4.5, 9, -3, 6});

  SetValues(&y, {0, 0, 0, 0, 0, 0});  // backward must not read the top's values
  for (int i = 0; i < 6; ++i) y.mutable_cpu_diff()[i] = i < 3 ? 1 : i - 2;
  for (auto& b : layer.blobs()) cpu_set(b->count(), 0.0, b->mutable_cpu_diff());
  layer.Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {2, -1, 0.5, 2, -2, 1.5});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {1 + 4, 2 + 10, 3 + 18});
  ExpectValues(layer.blobs()[1]->cpu_diff(), {2, 3, 4});
  // Parameter gradients accumulate.
  layer.Backward({&y}, {true}, {&x});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {10, 24, 42});
  ExpectValues(layer.blobs()[1]->cpu_diff(), {4, 6, 8});
}

TEST(ScaleLayer, HandWorkedScaleFromSecondBottom) {
  Blob<double> x({2, 3, 2}), s({2, 3}), y;
  for (int i = 0; i < 12; ++i) x.mutable_cpu_data()[i] = i + 1;
  SetValues(&s, {1, 2, 3, 4, 5, 6});
  ScaleLayer<double> layer(ScaleParam(0, 1, false));  // num_axes is ignored: s covers axes 0 and 1
  layer.SetUp({&x, &s}, {&y});
  EXPECT_TRUE(layer.blobs().empty());
  layer.Forward({&x, &s}, {&y});
  ExpectValues(y.cpu_data(), {1, 2, 6, 8, 15, 18, 28, 32, 45, 50, 66, 72});
  cpu_set(12, 1.0, y.mutable_cpu_diff());
  for (int pass = 0; pass < 2; ++pass) {
    // The second bottom's gradient is written, not accumulated.
    layer.Backward({&y}, {true, true}, {&x, &s});
    ExpectValues(s.cpu_diff(), {3, 7, 11, 15, 19, 23});
    ExpectValues(x.cpu_diff(), {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6});
  }
}

TEST(ScaleLayer, ParameterShapesAndDefaultFillers) {
  Blob<float> x({2, 3, 4, 5}), y;
  auto shape_of = [&](int axis, int num_axes) {
    ScaleLayer<float> layer(ScaleParam(axis, num_axes, true, true));
    layer.SetUp({&x}, {&y});
    EXPECT_EQ(layer.blobs()[1]->shape(), layer.blobs()[0]->shape());
    for (int i = 0; i < layer.blobs()[0]->count(); ++i) {
      EXPECT_EQ(layer.blobs()[0]->cpu_data()[i], 1);  // identity to start with
      EXPECT_EQ(layer.blobs()[1]->cpu_data()[i], 0);
    }
    return layer.blobs()[0]->shape();
  };
  EXPECT_EQ(shape_of(1, 1), (std::vector<int>{3}));
  EXPECT_EQ(shape_of(1, -1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(shape_of(1, 0), (std::vector<int>{}));
  EXPECT_EQ(shape_of(-1, 1), (std::vector<int>{5}));
  EXPECT_EQ(shape_of(0, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(y.shape(), x.shape());

  Blob<float> s({3, 4});
  ScaleLayer<float> two(ScaleParam(1, 1, true));
  two.SetUp({&x, &s}, {&y});
  ASSERT_EQ(two.blobs().size(), 1u);
  EXPECT_EQ(two.blobs()[0]->shape(), (std::vector<int>{3, 4}));
}

TEST(ScaleLayer, GradientLearnedScale) {
  struct Case {
    int axis, num_axes;
  };
  for (Case c : {Case{1, 1}, Case{0, 2}, Case{1, -1}, Case{1, 0}, Case{-1, 1}, Case{2, 2}}) {
    for (bool bias : {false, true}) {
      Blob<double> x({2, 3, 2, 2}), y;
      FillUniform(&x, -1.0, 1.0);
      ScaleLayer<double> layer(ScaleParam(c.axis, c.num_axes, bias));
      GradientChecker<double> checker(1e-4, 1e-6);
      checker.CheckGradient(&layer, {&x}, {&y});
    }
  }
}

TEST(ScaleLayer, GradientScaleFromSecondBottom) {
  struct Case {
    int axis;
    std::vector<int> scale_shape;
  };
  for (const Case& c : {Case{1, {3}}, Case{0, {2, 3}}, Case{0, {2, 3, 2}}, Case{2, {2}}, Case{1, {}}}) {
    for (bool bias : {false, true}) {
      Blob<double> x({2, 3, 2}), s(c.scale_shape), y;
      FillUniform(&x, -1.0, 1.0, 1);
      FillUniform(&s, -2.0, 2.0, 2);
      ScaleLayer<double> layer(ScaleParam(c.axis, 1, bias));
      GradientChecker<double> checker(1e-4, 1e-6);
      checker.CheckGradient(&layer, {&x, &s}, {&y});
    }
  }
}

// Runs one layer out of place and a copy of it in place; outputs and every gradient must agree.
void CheckInPlace(const LayerParameter& param, bool second_bottom) {
  Blob<double> x({2, 3, 4}), x_in_place({2, 3, 4}), y, dy({2, 3, 4});
  Blob<double> s({3}), s2({3});
  FillUniform(&x, -1.0, 1.0, 1);
  FillUniform(&dy, -1.0, 1.0, 2);
  FillUniform(&s, -1.0, 1.0, 3);
  x_in_place.CopyFrom(x);
  s2.CopyFrom(s);
  ScaleLayer<double> ref(param), in_place(param);
  std::vector<Blob<double>*> ref_bottom{&x}, in_place_bottom{&x_in_place};
  if (second_bottom) {
    ref_bottom.push_back(&s);
    in_place_bottom.push_back(&s2);
  }
  ref.SetUp(ref_bottom, {&y});
  in_place.SetUp(in_place_bottom, {&x_in_place});
  for (size_t b = 0; b < ref.blobs().size(); ++b) {
    in_place.blobs()[b]->CopyFrom(*ref.blobs()[b]);
    cpu_set(ref.blobs()[b]->count(), 0.0, ref.blobs()[b]->mutable_cpu_diff());
    cpu_set(ref.blobs()[b]->count(), 0.0, in_place.blobs()[b]->mutable_cpu_diff());
  }
  ref.Forward(ref_bottom, {&y});
  in_place.Forward(in_place_bottom, {&x_in_place});
  for (int i = 0; i < y.count(); ++i) ASSERT_EQ(x_in_place.cpu_data()[i], y.cpu_data()[i]);
  cpu_copy(dy.count(), dy.cpu_data(), y.mutable_cpu_diff());
  cpu_copy(dy.count(), dy.cpu_data(), x_in_place.mutable_cpu_diff());
  const std::vector<bool> down(ref_bottom.size(), true);
  ref.Backward({&y}, down, ref_bottom);
  in_place.Backward({&x_in_place}, down, in_place_bottom);
  for (int i = 0; i < x.count(); ++i) ASSERT_EQ(x_in_place.cpu_diff()[i], x.cpu_diff()[i]);
  for (size_t b = 0; b < ref.blobs().size(); ++b) {
    for (int i = 0; i < ref.blobs()[b]->count(); ++i) {
      ASSERT_EQ(in_place.blobs()[b]->cpu_diff()[i], ref.blobs()[b]->cpu_diff()[i]);
    }
  }
  if (second_bottom) {
    for (int i = 0; i < s.count(); ++i) ASSERT_EQ(s2.cpu_diff()[i], s.cpu_diff()[i]);
  }
}

TEST(ScaleLayer, InPlaceMatchesOutOfPlace) {
  CheckInPlace(ScaleParam(1, 1, true), false);
  CheckInPlace(ScaleParam(1, 1, false), false);
  CheckInPlace(ScaleParam(1, 1, true), true);
}

TEST(ScaleLayer, FrozenScaleInPlace) {
  // With the scale frozen (lr_mult 0 in a net) nothing needs the input: backward still gives dx = dy * s.
  Blob<double> x({2, 2}), dy({2, 2});
  SetValues(&x, {1, 2, 3, 4});
  ScaleLayer<double> layer(ScaleParam(1, 1, false));
  layer.SetUp({&x}, {&x});
  layer.set_param_propagate_down(0, false);
  SetValues(layer.blobs()[0].get(), {3, -2});
  cpu_set(2, 7.0, layer.blobs()[0]->mutable_cpu_diff());
  layer.Forward({&x}, {&x});
  ExpectValues(x.cpu_data(), {3, -4, 9, -8});
  cpu_set(4, 1.0, x.mutable_cpu_diff());
  layer.Backward({&x}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {3, -2, 3, -2});
  ExpectValues(layer.blobs()[0]->cpu_diff(), {7, 7});
}

TEST(ScaleLayer, BadInputIsAnError) {
  Blob<float> x({2, 3, 4}), y, wrong({4}), too_long({2, 3, 4, 5});
  EXPECT_THROW(ScaleLayer<float>(ScaleParam(1, -2, false)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(ScaleLayer<float>(ScaleParam(1, 3, false)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(ScaleLayer<float>(ScaleParam(3, 1, false)).SetUp({&x}, {&y}), Error);
  EXPECT_THROW(ScaleLayer<float>(ScaleParam(1, 1, false)).SetUp({&x, &wrong}, {&y}), Error);
  EXPECT_THROW(ScaleLayer<float>(ScaleParam(1, 1, false)).SetUp({&x, &too_long}, {&y}), Error);
  // Stored parameters of the wrong number or shape.
  ScaleLayer<float> two_blobs(ScaleParam(1, 1, false));
  for (int i = 0; i < 2; ++i) two_blobs.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{3}));
  EXPECT_THROW(two_blobs.SetUp({&x}, {&y}), Error);
  ScaleLayer<float> wrong_shape(ScaleParam(1, 1, false));
  wrong_shape.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{4}));
  EXPECT_THROW(wrong_shape.SetUp({&x}, {&y}), Error);
  ScaleLayer<float> wrong_bias(ScaleParam(1, 1, true));
  wrong_bias.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{3}));
  wrong_bias.blobs().push_back(std::make_shared<Blob<float>>(std::vector<int>{4}));
  EXPECT_THROW(wrong_bias.SetUp({&x}, {&y}), Error);
}

TEST(ScaleLayer, LargeBlobsMatchPlainComputation) {
  // Big enough for the threaded loops, on both layouts (inner > 1, and inner == 1 with column blocks).
  for (int axis : {1, 2}) {
    Blob<float> x({8, 40, 300}), y;
    FillUniform(&x, -1.0f, 1.0f, 1);
    ScaleLayer<float> layer(ScaleParam(axis, 1, true));
    layer.SetUp({&x}, {&y});
    layer.Forward({&x}, {&y});
    cpu_copy(x.count(), x.cpu_data(), y.mutable_cpu_diff());
    for (auto& b : layer.blobs()) cpu_set(b->count(), 0.0f, b->mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    const int dim = x.shape(axis), inner = axis == 1 ? 300 : 1;
    std::vector<double> ds(dim, 0), db(dim, 0);
    for (int i = 0; i < x.count(); ++i) {
      const int d = (i / inner) % dim;
      const float v = x.cpu_data()[i];
      ASSERT_NEAR(y.cpu_data()[i], v * layer.blobs()[0]->cpu_data()[d] + layer.blobs()[1]->cpu_data()[d], 1e-6);
      ds[d] += static_cast<double>(v) * v;
      db[d] += v;
    }
    for (int d = 0; d < dim; ++d) {
      EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[d], ds[d], 1e-3 * ds[d]);
      EXPECT_NEAR(layer.blobs()[1]->cpu_diff()[d], db[d], 1e-3);
    }
  }
}

}  // namespace
}  // namespace strata
