// ArgMax, Silence, Parameter, Tile, Reduction, Filter and MVN (Caffe's definitions): hand-worked forward and
// backward values, finite-difference gradient checks for every bottom and parameter that takes a gradient, the
// bad configurations each refuses, and small nets built from prototxt that exercise the net's bookkeeping for
// a layer with no tops (Silence), several tops (Filter), no backward (ArgMax) and a parameter as a top
// (Parameter).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "blob_values.hpp"
#include "data_test_util.hpp"
#include "gradient_checker.hpp"
#include "in_place_check.hpp"
#include "strata/layer_factory.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;

LayerParameter Param(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString(text, &p);
  return p;
}

std::shared_ptr<Layer<double>> Make(const std::string& text) { return LayerRegistry<double>::CreateLayer(Param(text)); }

// Sets the layer up on `bottom` and runs one forward.
std::shared_ptr<Layer<double>> SetUpAndForward(const std::string& text, const std::vector<Blob<double>*>& bottom,
                                               const std::vector<Blob<double>*>& top) {
  auto layer = Make(text);
  layer->SetUp(bottom, top);
  layer->Forward(bottom, top);
  return layer;
}

// Expects SetUp of the layer on blobs of the given shapes to fail with a message containing `parts`.
void ExpectSetUpError(const std::string& text, const std::vector<std::vector<int>>& bottom_shapes, int tops,
                      const std::vector<std::string>& parts) {
  std::vector<std::unique_ptr<Blob<float>>> owned;
  std::vector<Blob<float>*> bottom, top;
  for (const auto& s : bottom_shapes) {
    owned.emplace_back(new Blob<float>(s));
    bottom.push_back(owned.back().get());
  }
  for (int t = 0; t < tops; ++t) {
    owned.emplace_back(new Blob<float>());
    top.push_back(owned.back().get());
  }
  SCOPED_TRACE(text);
  ExpectErrorContaining([&] { LayerRegistry<float>::CreateLayer(Param(text))->SetUp(bottom, top); }, parts);
}

void SetDiff(Blob<double>* blob, const std::vector<double>& values) {
  ASSERT_EQ(blob->count(), static_cast<int>(values.size()));
  std::copy(values.begin(), values.end(), blob->mutable_cpu_diff());
}

// ---------------------------------------------------------------------------------------------------------- ArgMax

TEST(ArgMaxLayer, HandWorkedOverEachItemTiesGoToTheLargerIndex) {
  Blob<double> x({2, 4}), y;
  SetValues(&x, {1, 3, 3, 2, -1, 5, 0, 5});
  SetUpAndForward(R"(type: "ArgMax")", {&x}, {&y});
  // No axis: (N, 1, top_k). Of the tied 3s (and 5s) Caffe's descending (value, index) sort puts the larger index
  // first.
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 1, 1}));
  ExpectValues(y.cpu_data(), {2, 3});

  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 3 out_max_val: true })", {&x}, {&y});
  // (N, 2, top_k): the indices, then the values.
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 2, 3}));
  ExpectValues(y.cpu_data(), {2, 1, 3, 3, 3, 2, /* item 1 */ 3, 1, 2, 5, 5, 0});
}

TEST(ArgMaxLayer, HandWorkedAlongAnAxis) {
  // x[n][c][w]: n0: c0 (1 6), c1 (4 2), c2 (3 5); n1: c0 (0 0), c1 (7 -1), c2 (7 -2).
  Blob<double> x({2, 3, 2}), y;
  SetValues(&x, {1, 6, 4, 2, 3, 5, 0, 0, 7, -1, 7, -2});
  for (int axis : {1, -2}) {
    SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 2 axis: )" + std::to_string(axis) + "}", {&x}, {&y});
    EXPECT_EQ(y.shape(), (std::vector<int>{2, 2, 2}));
    // y[n][j][w], j-th largest along c: n0 w0 (1 4 3) -> 1, 2; n0 w1 (6 2 5) -> 0, 2; n1 w0 (0 7 7) -> 2, 1 (tie);
    // n1 w1 (0 -1 -2) -> 0, 1.
    ExpectValues(y.cpu_data(), {1, 0, 2, 2, 2, 0, 1, 1});
  }
  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 2 axis: 1 out_max_val: true })", {&x}, {&y});
  ExpectValues(y.cpu_data(), {4, 6, 3, 5, 7, 0, 7, -1});
  // Along the last axis, top_k 1.
  SetUpAndForward(R"(type: "ArgMax" argmax_param { axis: 2 })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 1}));
  ExpectValues(y.cpu_data(), {1, 0, 1, 1, 0, 0});
}

TEST(ArgMaxLayer, TopShapes) {
  Blob<double> x({2, 3, 4, 5}), y;
  FillUniform(&x, -1.0, 1.0);
  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 3 })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 1, 3, 1}));
  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 3 out_max_val: true })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 2, 3, 1}));
  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 4 axis: 3 })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 4, 4}));
  // The values of the no-axis top are sorted, largest first, and are the bottom's values at those indices.
  SetUpAndForward(R"(type: "ArgMax" argmax_param { top_k: 5 out_max_val: true })", {&x}, {&y});
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 5; ++j) {
      const double index = y.cpu_data()[n * 10 + j], value = y.cpu_data()[n * 10 + 5 + j];
      EXPECT_EQ(value, x.cpu_data()[n * 60 + static_cast<int>(index)]);
      if (j > 0) {
        EXPECT_GT(y.cpu_data()[n * 10 + 5 + j - 1], value);
      }
    }
  }
}

TEST(ArgMaxLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "a" type: "ArgMax" argmax_param { top_k: 0 })", {{2, 3}}, 1, {"top_k", "at least 1"});
  ExpectSetUpError(R"(name: "a" type: "ArgMax" argmax_param { top_k: 4 axis: 1 })", {{2, 3}}, 1,
                   {"top_k 4", "exceeds the extent 3 of axis 1"});
  ExpectSetUpError(R"(name: "a" type: "ArgMax" argmax_param { top_k: 7 })", {{2, 3, 2}}, 1,
                   {"top_k 7", "exceeds the 6 values per item"});
  ExpectSetUpError(R"(name: "a" type: "ArgMax" argmax_param { axis: 3 })", {{2, 3, 2}}, 1,
                   {"argmax_param.axis 3", "out of range"});
  ExpectSetUpError(R"(name: "a" type: "ArgMax" argmax_param { axis: -4 })", {{2, 3, 2}}, 1,
                   {"argmax_param.axis -4", "out of range"});
  ExpectSetUpError(R"(name: "a" type: "ArgMax")", {{2, 3}, {2, 3}}, 1, {"takes 1 bottom"});
}

TEST(ArgMaxLayer, HasNoBackward) {
  Blob<double> x({2, 3}), y;
  FillUniform(&x, -1.0, 1.0);
  auto layer = SetUpAndForward(R"(name: "pred" type: "ArgMax")", {&x}, {&y});
  ExpectErrorContaining([&] { layer->Backward({&y}, {true}, {&x}); }, {"'pred' (ArgMax)", "no gradient"});
  layer->Backward({&y}, {false}, {&x});  // nothing asked, nothing to refuse
}

// --------------------------------------------------------------------------------------------------------- Silence

TEST(SilenceLayer, TakesAnyBottomsMakesNoTopsAndZeroesGradients) {
  Blob<double> a({2, 3}), b({4});
  FillUniform(&a, -1.0, 1.0);
  auto layer = SetUpAndForward(R"(type: "Silence")", {&a, &b}, {});
  cpu_set(a.count(), 7.0, a.mutable_cpu_diff());
  cpu_set(b.count(), 7.0, b.mutable_cpu_diff());
  layer->Backward({}, {true, false}, {&a, &b});
  for (int i = 0; i < a.count(); ++i) EXPECT_EQ(a.cpu_diff()[i], 0.0);
  for (int i = 0; i < b.count(); ++i) EXPECT_EQ(b.cpu_diff()[i], 7.0);  // not asked: untouched
}

TEST(SilenceLayer, Gradient) {
  // Nothing depends on the bottoms: their gradient is zero, which is what backward writes.
  Blob<double> a({2, 3}), b({3, 2, 2});
  FillUniform(&a, -1.0, 1.0);
  FillUniform(&b, -1.0, 1.0, 2);
  auto layer = Make(R"(type: "Silence")");
  GradientChecker<double> checker;
  checker.CheckGradient(layer.get(), {&a, &b}, {});
}

TEST(SilenceLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "s" type: "Silence")", {}, 0, {"at least 1 bottom"});
  ExpectSetUpError(R"(name: "s" type: "Silence")", {{2}}, 1, {"produces 0 top"});
}

// ------------------------------------------------------------------------------------------------------- Parameter

TEST(ParameterLayer, HandWorked) {
  Blob<double> y;
  auto layer = Make(R"(type: "Parameter" parameter_param { shape { dim: 2 dim: 3 } })");
  layer->SetUp({}, {&y});
  ASSERT_EQ(layer->blobs().size(), 1u);
  Blob<double>& w = *layer->blobs()[0];
  EXPECT_EQ(w.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3}));
  for (int i = 0; i < w.count(); ++i) EXPECT_EQ(w.cpu_data()[i], 0.0);  // no filler: zeros, as in Caffe
  SetValues(&w, {1, 2, 3, 4, 5, 6});
  layer->Forward({}, {&y});
  ExpectValues(y.cpu_data(), {1, 2, 3, 4, 5, 6});
  // The top's gradient is the parameter's (added to what it holds, like every parameter gradient).
  cpu_set(w.count(), 0.0, w.mutable_cpu_diff());
  SetDiff(&y, {-1, 0, 1, 2, 3, 4});
  layer->Backward({&y}, {}, {});
  ExpectValues(w.cpu_diff(), {-1, 0, 1, 2, 3, 4});
  layer->Backward({&y}, {}, {});
  ExpectValues(w.cpu_diff(), {-2, 0, 2, 4, 6, 8});
}

TEST(ParameterLayer, NoShapeIsAScalarAndAStoredBlobIsKept) {
  Blob<double> y;
  auto scalar = Make(R"(type: "Parameter")");
  scalar->SetUp({}, {&y});
  EXPECT_EQ(y.num_axes(), 0);
  EXPECT_EQ(y.count(), 1);
  // A value that comes with the layer (a caffemodel) is its starting value.
  auto stored = Make(R"(type: "Parameter" parameter_param { shape { dim: 2 } }
                        blobs { shape { dim: 2 } data: 1.5 data: -2 })");
  stored->SetUp({}, {&y});
  stored->Forward({}, {&y});
  ExpectValues(y.cpu_data(), {1.5, -2});
}

TEST(ParameterLayer, Gradient) {
  Blob<double> y;
  auto layer = Make(R"(type: "Parameter" parameter_param { shape { dim: 3 dim: 2 dim: 2 } })");
  layer->SetUp({}, {&y});
  FillUniform(layer->blobs()[0].get(), -1.0, 1.0);
  GradientChecker<double> checker;
  checker.CheckGradient(layer.get(), {}, {&y});
  EXPECT_EQ(checker.last_num_checked(), 12);
}

TEST(ParameterLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "p" type: "Parameter" parameter_param { shape { dim: 2 dim: 3 } }
                      blobs { shape { dim: 4 } data: 0 data: 0 data: 0 data: 0 })",
                   {}, 1, {"'p' (Parameter)", "parameter_param.shape asks for one of shape 2 3"});
  ExpectSetUpError(R"(name: "p" type: "Parameter" parameter_param { shape { dim: 2 } })", {{2}}, 1,
                   {"takes 0 bottom"});
}

// ------------------------------------------------------------------------------------------------------------ Tile

TEST(TileLayer, HandWorked) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, 2, 3, 4, 5, 6});
  auto layer = SetUpAndForward(R"(type: "Tile" tile_param { tiles: 2 })", {&x}, {&y});  // axis 1 by default
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 6}));
  ExpectValues(y.cpu_data(), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  // Backward sums each value's copies.
  SetDiff(&y, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  layer->Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {5, 7, 9, 17, 19, 21});

  SetUpAndForward(R"(type: "Tile" tile_param { axis: 0 tiles: 3 })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{6, 3}));
  ExpectValues(y.cpu_data(), {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});

  Blob<double> z({2, 3, 4, 5});
  SetUpAndForward(R"(type: "Tile" tile_param { tiles: 3 })", {&z}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 9, 4, 5}));
  SetUpAndForward(R"(type: "Tile" tile_param { axis: -1 tiles: 1 })", {&z}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 4, 5}));
}

TEST(TileLayer, Gradient) {
  for (const char* text : {R"(type: "Tile" tile_param { tiles: 3 })", R"(type: "Tile" tile_param { axis: -1 tiles: 2 })",
                           R"(type: "Tile" tile_param { axis: 0 tiles: 2 })"}) {
    SCOPED_TRACE(text);
    Blob<double> x({2, 3, 4}), y;
    FillUniform(&x, -1.0, 1.0);
    auto layer = Make(text);
    GradientChecker<double> checker;
    checker.CheckGradient(layer.get(), {&x}, {&y});
  }
}

TEST(TileLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "t" type: "Tile")", {{2, 3}}, 1, {"tile_param.tiles must be given"});
  ExpectSetUpError(R"(name: "t" type: "Tile" tile_param { tiles: 0 })", {{2, 3}}, 1,
                   {"tile_param.tiles must be at least 1, got 0"});
  ExpectSetUpError(R"(name: "t" type: "Tile" tile_param { tiles: -2 })", {{2, 3}}, 1, {"at least 1, got -2"});
  ExpectSetUpError(R"(name: "t" type: "Tile" tile_param { axis: 2 tiles: 2 })", {{2, 3}}, 1,
                   {"tile_param.axis 2", "out of range", "[-2, 1]"});
}

// ------------------------------------------------------------------------------------------------------- Reduction

TEST(ReductionLayer, HandWorkedForward) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, -2, 0, -4, 5, -6});
  struct Case {
    const char* text;
    std::vector<int> shape;
    std::vector<double> expected;
  };
  const Case cases[] = {
      {R"(type: "Reduction")", {}, {-6}},  // SUM over everything: a scalar
      {R"(type: "Reduction" reduction_param { coeff: 2 })", {}, {-12}},
      {R"(type: "Reduction" reduction_param { operation: MEAN coeff: 3 })", {}, {-3}},  // 3 * -6 / 6
      {R"(type: "Reduction" reduction_param { axis: 1 })", {2}, {-1, -5}},
      {R"(type: "Reduction" reduction_param { axis: -1 operation: ASUM })", {2}, {3, 15}},
      {R"(type: "Reduction" reduction_param { axis: 1 operation: SUMSQ })", {2}, {5, 77}},
      {R"(type: "Reduction" reduction_param { axis: 1 operation: MEAN })", {2}, {-1.0 / 3, -5.0 / 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    SetUpAndForward(c.text, {&x}, {&y});
    EXPECT_EQ(y.shape(), c.shape);
    ExpectValues(y.cpu_data(), c.expected);
  }
  Blob<double> z({2, 3, 4});
  SetUpAndForward(R"(type: "Reduction" reduction_param { axis: 2 })", {&z}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3}));
}

TEST(ReductionLayer, HandWorkedBackward) {
  Blob<double> x({2, 3}), y;
  SetValues(&x, {1, -2, 0, -4, 5, -6});
  // dy = (1, -2) and coeff 2, so each row's factor g = coeff * dy is 2 and -4.
  struct Case {
    const char* op;
    std::vector<double> expected;
  };
  const Case cases[] = {
      {"SUM", {2, 2, 2, -4, -4, -4}},
      {"MEAN", {2.0 / 3, 2.0 / 3, 2.0 / 3, -4.0 / 3, -4.0 / 3, -4.0 / 3}},
      {"ASUM", {2, -2, 0, 4, -4, 4}},  // g * sign(x), and sign(0) = 0
      {"SUMSQ", {4, -8, 0, 32, -40, 48}},  // g * 2x
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    auto layer = SetUpAndForward(
        std::string(R"(type: "Reduction" reduction_param { axis: 1 coeff: 2 operation: )") + c.op + " }", {&x},
        {&y});
    SetDiff(&y, {1, -2});
    layer->Backward({&y}, {true}, {&x});
    ExpectValues(x.cpu_diff(), c.expected);
  }
}

TEST(ReductionLayer, Gradient) {
  for (const char* op : {"SUM", "MEAN", "ASUM", "SUMSQ"}) {
    for (int axis : {0, 1, -1}) {
      const std::string text = std::string(R"(type: "Reduction" reduction_param { coeff: 0.7 operation: )") + op +
                               " axis: " + std::to_string(axis) + " }";
      SCOPED_TRACE(text);
      Blob<double> x({2, 3, 4}), y;
      FillUniform(&x, -1.0, 1.0);
      auto layer = Make(text);
      // |x| has a kink at 0: values within 0.01 of it are skipped (none of these is, in practice).
      GradientChecker<double> checker(1e-3, 1e-5, 1701, 0, 1e-2);
      checker.CheckGradient(layer.get(), {&x}, {&y});
    }
  }
}

TEST(ReductionLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "r" type: "Reduction" reduction_param { axis: 3 })", {{2, 3, 4}}, 1,
                   {"reduction_param.axis 3", "out of range", "[-3, 2]"});
  ExpectSetUpError(R"(name: "r" type: "Reduction" reduction_param { axis: -4 })", {{2, 3, 4}}, 1,
                   {"reduction_param.axis -4", "out of range"});
}

// ---------------------------------------------------------------------------------------------------------- Filter

TEST(FilterLayer, HandWorked) {
  Blob<double> a({4, 2}), b({4}), selector({4, 1}), ta, tb;
  SetValues(&a, {1, 2, 3, 4, 5, 6, 7, 8});
  SetValues(&b, {10, 20, 30, 40});
  SetValues(&selector, {0, 1, 0, 2});  // any non-zero value selects
  auto layer = Make(R"(type: "Filter")");
  layer->SetUp({&a, &b, &selector}, {&ta, &tb});
  // At set-up the tops keep every item (Caffe's), the selection applies from the first forward.
  EXPECT_EQ(ta.shape(), (std::vector<int>{4, 2}));
  layer->Forward({&a, &b, &selector}, {&ta, &tb});
  EXPECT_EQ(ta.shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(tb.shape(), (std::vector<int>{2}));
  ExpectValues(ta.cpu_data(), {3, 4, 7, 8});
  ExpectValues(tb.cpu_data(), {20, 40});
  // Backward puts the gradients back at the selected items and zero elsewhere.
  cpu_set(a.count(), 9.0, a.mutable_cpu_diff());
  cpu_set(b.count(), 9.0, b.mutable_cpu_diff());
  SetDiff(&ta, {1, 2, 3, 4});
  SetDiff(&tb, {5, 6});
  layer->Backward({&ta, &tb}, {true, true, false}, {&a, &b, &selector});
  ExpectValues(a.cpu_diff(), {0, 0, 1, 2, 0, 0, 3, 4});
  ExpectValues(b.cpu_diff(), {0, 5, 0, 6});
}

// A batch of which nothing is selected would train the layers after it on nothing (loss 0 throughout, when the
// selector is never set): an Error at that forward, naming the layer. Set-up, before any selector value, passes.
TEST(FilterLayer, SelectingNothingIsAnError) {
  Blob<double> a({3, 2}), selector({3}), ta;
  FillUniform(&a, -1.0, 1.0);
  SetValues(&selector, {0, 0, 0});
  auto layer = Make(R"(name: "f" type: "Filter")");
  layer->SetUp({&a, &selector}, {&ta});
  EXPECT_EQ(ta.shape(), (std::vector<int>{3, 2}));
  try {
    layer->Forward({&a, &selector}, {&ta});
    ADD_FAILURE() << "a selection of nothing was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'f' (Filter): the selector (the last bottom) selects none of the "
                                         "batch's 3 items"), std::string::npos) << e.what();
  }
  // A later batch with a selection runs.
  SetValues(&selector, {1, 0, 1});
  layer->Forward({&a, &selector}, {&ta});
  EXPECT_EQ(ta.shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(ta.cpu_data()[2], a.cpu_data()[4]);
}

TEST(FilterLayer, Gradient) {
  Blob<double> a({5, 3, 2}), b({5, 4}), selector({5, 1, 1}), ta, tb;
  FillUniform(&a, -1.0, 1.0);
  FillUniform(&b, -1.0, 1.0, 2);
  SetValues(&selector, {1, 0, 1, 1, 0});
  for (int checked : {0, 1}) {
    auto layer = Make(R"(type: "Filter")");
    GradientChecker<double> checker;
    checker.CheckGradient(layer.get(), {&a, &b, &selector}, {&ta, &tb}, checked);
  }
}

TEST(FilterLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "f" type: "Filter")", {{4, 2}, {4, 2}}, 1,
                   {"selector (the last bottom) must have shape (N) or (N, 1, ...)", "got shape 4 2"});
  ExpectSetUpError(R"(name: "f" type: "Filter")", {{3, 2}, {4, 1}}, 1,
                   {"bottom 0 of shape 3 2", "as many items (axis 0) as the selector"});
  ExpectSetUpError(R"(name: "f" type: "Filter")", {{4, 2}, {4, 3}, {4}}, 1, {"3 bottoms need 2 top(s), got 1"});
  ExpectSetUpError(R"(name: "f" type: "Filter")", {{4}}, 1, {"at least 2 bottom"});
  // The selector never gets a gradient: asking for one is refused, and force_backward does not ask.
  Blob<double> a({2, 2}), selector({2}), ta;
  SetValues(&selector, {1, 1});
  LayerParameter p = Param(R"(name: "f" type: "Filter" bottom: "a" bottom: "sel" top: "ta")");
  auto layer = LayerRegistry<double>::CreateLayer(p);
  layer->SetUp({&a, &selector}, {&ta});
  layer->Forward({&a, &selector}, {&ta});
  ExpectErrorContaining([&] { layer->Backward({&ta}, {true, true}, {&a, &selector}); },
                        {"'f' (Filter) cannot backpropagate to its selector"});
  EXPECT_TRUE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->AllowForceBackward(1));
}

// ------------------------------------------------------------------------------------------------------------- MVN

// x: channel 0 (1 2 3), mean 2, variance 2/3; channel 1 (2 2 2), mean 2, variance 0.
void FillMvnExample(Blob<double>* x) { SetValues(x, {1, 2, 3, 2, 2, 2}); }

TEST(MVNLayer, HandWorkedForwardEpsIsAddedToTheStandardDeviation) {
  Blob<double> x({1, 2, 1, 3}), y;
  FillMvnExample(&x);
  const double eps = static_cast<double>(1e-9f);  // the default, a float in the prototxt
  const double a = 1 / (std::sqrt(2.0 / 3) + eps);
  SetUpAndForward(R"(type: "MVN")", {&x}, {&y});
  // A constant channel becomes 0 (0 / eps), not NaN.
  ExpectValues(y.cpu_data(), {-a, 0, a, 0, 0, 0});
  // eps outside the square root: 1 / (sqrt(2/3) + 0.5) = 0.75959, not 1 / sqrt(2/3 + 0.5) = 0.9258.
  SetUpAndForward(R"(type: "MVN" mvn_param { eps: 0.5 })", {&x}, {&y});
  const double b = 1 / (std::sqrt(2.0 / 3) + 0.5);
  ExpectValues(y.cpu_data(), {-b, 0, b, 0, 0, 0});
  EXPECT_NEAR(b, 0.759592, 1e-6);
  // Across channels: one mean 2 and variance 2/6 for all six values.
  SetUpAndForward(R"(type: "MVN" mvn_param { across_channels: true })", {&x}, {&y});
  const double c = 1 / (std::sqrt(1.0 / 3) + eps);
  ExpectValues(y.cpu_data(), {-c, 0, c, 0, 0, 0});
  SetUpAndForward(R"(type: "MVN" mvn_param { normalize_variance: false })", {&x}, {&y});
  ExpectValues(y.cpu_data(), {-1, 0, 1, 0, 0, 0});
}

TEST(MVNLayer, HandWorkedBackward) {
  Blob<double> x({1, 2, 1, 3}), y;
  FillMvnExample(&x);
  // Mean only: dx = dy - mean(dy) per channel.
  auto mean_only = SetUpAndForward(R"(type: "MVN" mvn_param { normalize_variance: false })", {&x}, {&y});
  SetDiff(&y, {1, 2, 3, 4, 5, 9});
  mean_only->Backward({&y}, {true}, {&x});
  ExpectValues(x.cpu_diff(), {-1, 0, 1, -2, -1, 3});
  // With the variance (eps 0.5 so it shows): channel 0 has y = (-b, 0, b), s = sqrt(2/3) + 0.5, b = 1 / s;
  // dy = (1, 2, 3): mean(dy) = 2, mean(dy * y) = 2b / 3, dx = (dy - 2 - y * 2b/3) / s.
  // Channel 1 has y = 0: dx = (dy - mean(dy)) / 0.5.
  auto full = SetUpAndForward(R"(type: "MVN" mvn_param { eps: 0.5 })", {&x}, {&y});
  SetDiff(&y, {1, 2, 3, 4, 5, 9});
  full->Backward({&y}, {true}, {&x});
  const double s = std::sqrt(2.0 / 3) + 0.5, b = 1 / s;
  ExpectValues(x.cpu_diff(), {(-1 + b * 2 * b / 3) / s, 0, (1 - b * 2 * b / 3) / s, -4, -2, 6}, 1e-12);
}

TEST(MVNLayer, TopIsFourDimensionalAsInCaffe) {
  Blob<double> x({2, 3}), y;
  FillUniform(&x, -1.0, 1.0);
  SetUpAndForward(R"(type: "MVN" mvn_param { across_channels: true })", {&x}, {&y});
  EXPECT_EQ(y.shape(), (std::vector<int>{2, 3, 1, 1}));
  // Each item normalised over its 3 values: mean 0, and variance 1 up to eps.
  for (int n = 0; n < 2; ++n) {
    double sum = 0, sumsq = 0;
    for (int c = 0; c < 3; ++c) {
      sum += y.cpu_data()[n * 3 + c];
      sumsq += y.cpu_data()[n * 3 + c] * y.cpu_data()[n * 3 + c];
    }
    EXPECT_NEAR(sum, 0, 1e-12);
    EXPECT_NEAR(sumsq / 3, 1, 1e-6);  // eps in the divisor: 1 - 2 eps / std
  }
}

TEST(MVNLayer, Gradient) {
  for (const char* text : {R"(type: "MVN")", R"(type: "MVN" mvn_param { across_channels: true })",
                           R"(type: "MVN" mvn_param { normalize_variance: false })",
                           R"(type: "MVN" mvn_param { normalize_variance: false across_channels: true })"}) {
    SCOPED_TRACE(text);
    Blob<double> x({2, 3, 4, 3}), y;
    FillUniform(&x, -1.0, 1.0);
    auto layer = Make(text);
    GradientChecker<double> checker;
    checker.CheckGradient(layer.get(), {&x}, {&y});
  }
}

TEST(MVNLayer, InPlace) {
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "MVN")"), {2, 3, 4, 5});
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "MVN" mvn_param { across_channels: true })"), {2, 3, 4, 5});
  ExpectInPlaceMatchesOutOfPlace(Param(R"(type: "MVN" mvn_param { normalize_variance: false })"), {2, 3, 4, 5});
}

TEST(MVNLayer, BadConfigurationsAreErrors) {
  ExpectSetUpError(R"(name: "m" type: "MVN")", {{2, 3, 4, 5, 6}}, 1, {"at most 4 axes", "2 3 4 5 6"});
}

// ------------------------------------------------------------------------------------------------------------ Nets

NetParameter ParseNet(const std::string& text, bool force_backward = false) {
  NetParameter p;
  ReadProtoFromTextString(text, &p, "test.prototxt");
  p.mutable_state()->set_phase(TRAIN);
  p.set_force_backward(force_backward);
  return p;
}

// loss = 0.5 * sum((x * w)^2) with w a Parameter layer's blob; a second input is silenced.
const char* kParameterAndSilenceNet = R"(
name: "parameter_silence"
layer { name: "in" type: "Input" top: "x" top: "unused"
        input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 4 } } }
layer { name: "w" type: "Parameter" top: "w" parameter_param { shape { dim: 2 dim: 3 } } }
layer { name: "xw" type: "Eltwise" bottom: "x" bottom: "w" top: "xw" eltwise_param { operation: PROD } }
layer { name: "loss" type: "Reduction" bottom: "xw" top: "loss" reduction_param { operation: SUMSQ }
        loss_weight: 0.5 }
layer { name: "silence" type: "Silence" bottom: "unused" }
)";

TEST(ShapeLayersInNet, SilenceHasNoTopsAndParameterLearns) {
  Net<double> net(ParseNet(kParameterAndSilenceNet));
  const int silence = net.layer_index("silence");
  EXPECT_TRUE(net.top_vecs()[silence].empty());
  EXPECT_FALSE(net.layer_need_backward(silence));  // it reaches no loss
  // The silenced blob is consumed, so the loss is the only output.
  ASSERT_EQ(net.output_blobs().size(), 1u);
  EXPECT_EQ(net.output_blobs()[0], net.blob_by_name("loss").get());
  // The Parameter layer's blob is the net's one learnable parameter.
  ASSERT_EQ(net.learnable_params().size(), 1u);
  Blob<double>& w = *net.layer_by_name("w")->blobs()[0];
  EXPECT_EQ(net.learnable_params()[0], &w);
  EXPECT_TRUE(net.layer_need_backward(net.layer_index("w")));

  Blob<double>& x = *net.blob_by_name("x");
  SetValues(&x, {1, 2, 3, -1, 0.5, 2});
  SetValues(&w, {2, -1, 0.5, 1, 4, -2});
  double loss = 0;
  net.Forward(&loss);
  // 0.5 * (4 + 4 + 2.25 + 1 + 4 + 16)
  EXPECT_DOUBLE_EQ(loss, 15.625);
  cpu_set(w.count(), 0.0, w.mutable_cpu_diff());
  net.Backward();
  // dL/dw = x^2 * w
  ExpectValues(w.cpu_diff(), {2, -4, 4.5, 1, 1, -8});
}

TEST(ShapeLayersInNet, ForceBackwardRunsSilenceWhichZeroesItsBottoms) {
  Net<double> net(ParseNet(kParameterAndSilenceNet, true));
  EXPECT_TRUE(net.layer_need_backward(net.layer_index("silence")));
  Blob<double>& unused = *net.blob_by_name("unused");
  net.Forward();
  cpu_set(unused.count(), 5.0, unused.mutable_cpu_diff());
  net.Backward();
  for (int i = 0; i < unused.count(); ++i) EXPECT_EQ(unused.cpu_diff()[i], 0.0);
}

// Scores from a learned layer feed ArgMax (an output, no backward) and Filter (two tops: the kept scores, whose
// squares are the loss, and the kept inputs, silenced).
const char* kFilterArgMaxNet = R"(
name: "filter_argmax"
layer { name: "in" type: "Input" top: "x" top: "sel" input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "scores"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 1 }
                              bias_filler { type: "uniform" min: -1 max: 1 } } }
layer { name: "pred" type: "ArgMax" bottom: "scores" top: "pred" }
layer { name: "filter" type: "Filter" bottom: "scores" bottom: "x" bottom: "sel"
        top: "kept_scores" top: "kept_x" }
layer { name: "loss" type: "Reduction" bottom: "kept_scores" top: "loss" reduction_param { operation: SUMSQ }
        loss_weight: 1 }
layer { name: "silence" type: "Silence" bottom: "kept_x" }
)";

TEST(ShapeLayersInNet, FilterWithTwoTopsAndArgMaxWithoutBackward) {
  Strata::set_random_seed(7);
  Net<double> net(ParseNet(kFilterArgMaxNet));
  const int filter = net.layer_index("filter"), pred = net.layer_index("pred");
  EXPECT_EQ(net.top_vecs()[filter].size(), 2u);
  EXPECT_FALSE(net.layer_need_backward(pred));  // its top reaches no loss
  EXPECT_TRUE(net.layer_need_backward(filter));
  // Only the scores get a gradient: x is an input, and the selector never does.
  EXPECT_EQ(net.bottom_need_backward()[filter], (std::vector<bool>{true, false, false}));
  // Outputs: the loss and ArgMax's predictions.
  EXPECT_EQ(net.output_blobs().size(), 2u);

  Blob<double>& x = *net.blob_by_name("x");
  FillUniform(&x, -1.0, 1.0, 3);
  SetValues(net.blob_by_name("sel").get(), {1, 0, 0, 1});
  net.ForwardBackward();
  const Blob<double>& scores = *net.blob_by_name("scores");
  EXPECT_EQ(net.blob_by_name("kept_scores")->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(net.blob_by_name("kept_x")->shape(), (std::vector<int>{2, 3}));
  // ArgMax picks each row's largest score.
  const Blob<double>& p = *net.blob_by_name("pred");
  for (int n = 0; n < 4; ++n) {
    const double* row = scores.cpu_data() + n * 3;
    EXPECT_EQ(p.cpu_data()[n], static_cast<double>(std::max_element(row, row + 3) - row));
  }
  // loss = sum over the kept rows (0 and 3) of scores^2, so dL/dW[o][j] = sum over kept n of 2 s[n][o] x[n][j].
  const Blob<double>& W = *net.layer_by_name("fc")->blobs()[0];
  for (int o = 0; o < 3; ++o) {
    for (int j = 0; j < 3; ++j) {
      double expect = 0;
      for (int n : {0, 3}) expect += 2 * scores.cpu_data()[n * 3 + o] * x.cpu_data()[n * 3 + j];
      EXPECT_NEAR(W.cpu_diff()[o * 3 + j], expect, 1e-12);
    }
  }

  // Selecting nothing is refused in that forward (an empty batch trains nothing while looking trained:
  // docs/reliability.md), naming the layer.
  SetValues(net.blob_by_name("sel").get(), {0, 0, 0, 0});
  net.ClearParamDiffs();
  try {
    net.ForwardBackward();
    ADD_FAILURE() << "an empty selection was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'filter' (Filter): the selector (the last bottom) selects none"),
              std::string::npos) << e.what();
  }
}

TEST(ShapeLayersInNet, ForcedBackwardThroughArgMaxIsRefused) {
  Net<double> net(ParseNet(kFilterArgMaxNet, true));
  EXPECT_TRUE(net.layer_need_backward(net.layer_index("pred")));
  // Filter never sends a gradient to its selector, even forced.
  EXPECT_FALSE(net.bottom_need_backward()[net.layer_index("filter")][2]);
  SetValues(net.blob_by_name("sel").get(), {1, 1, 0, 1});
  net.Forward();
  ExpectErrorContaining([&] { net.Backward(); }, {"'pred' (ArgMax)", "no gradient"});
}

}  // namespace
}  // namespace strata
