// Inputs that crashed (or were undefined behaviour in) a parser or loader, found while writing the fuzz
// targets (fuzz/README.md) or by running them. Each goes through the same code as its target and must end
// in a clean strata::Error. The targets' own inputs live in fuzz/corpus/; the ones here are the bugs.
#include <gtest/gtest.h>

#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/data/data_transformer.hpp"
#include "strata/data/datum.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;

// fuzz/datum: crop_size is a uint32; above INT_MAX it became a negative int, passed "crop <= height", and
// the crop offsets overflowed (signed overflow in Rand(height - crop + 1)) before reading far outside the image.
TEST(FuzzRegressions, CropSizeAboveIntMax) {
  TransformationParameter param;
  param.set_crop_size(0x80000001u);
  Datum datum;
  datum.set_channels(1);
  datum.set_height(4);
  datum.set_width(4);
  datum.set_data(std::string(16, '\x7f'));
  for (Phase phase : {TRAIN, TEST}) {
    DataTransformer<float> t(param, phase);
    ExpectErrorContaining([&] { t.OutputShape(1, 4, 4); }, {"crop_size 2147483649", "larger than the data"});
    std::vector<float> out(16);
    ExpectErrorContaining([&] { t.Transform(datum, out.data()); }, {"crop_size 2147483649"});
  }
}

// fuzz/solverstate: a negative current_step was restored as is, and a multistep rate then read
// stepvalue(-1), before the start of the list.
TEST(FuzzRegressions, SolverStateNegativeStep) {
  SolverParameter param;
  ReadProtoFromTextString("type: 'SGD' base_lr: 0.1 lr_policy: 'multistep' stepvalue: 2 gamma: 0.5", &param);
  ReadProtoFromTextString(R"(
    layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z" inner_product_param { num_output: 4 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" })",
                          param.mutable_net_param());
  std::unique_ptr<Solver<float>> solver = SolverRegistry<float>::Create(param);
  SolverState state;
  for (size_t i = 0; i < solver->net()->learnable_params().size(); ++i) state.add_history();
  state.set_current_step(-1);
  ExpectErrorContaining([&] { solver->Restore(state, "s.solverstate"); }, {"s.solverstate", "step -1"});
  state.set_current_step(0);
  state.set_iter(INT_MIN);
  ExpectErrorContaining([&] { solver->Restore(state, "s.solverstate"); }, {"s.solverstate", "iteration"});
}

// fuzz/net_prototxt (crash-b1e0ff70): a batch dimension of 0 made the Input's top empty, and the
// InnerProduct below it failed glog's CHECK(data_) on its bias multiplier (aborting the process).
TEST(FuzzRegressions, NetWithAnEmptyInput) {
  const char* kNet = R"(name: "v1" input: "data" input_dim: 0 input_dim: 1 input_dim: 4 input_dim: 4
layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip" blobs_lr: 1 blobs_lr: 2
         inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layers { name: "relu" type: RELU bottom: "ip" top: "ip" }
layers { name: "prob" type: SOFTMAX bottom: "ip" top: "prob" })";
  NetParameter param;
  ReadProtoFromTextString(kNet, &param);
  UpgradeV1Net(&param);
  ExpectErrorContaining([&] { Net<float> net(param); }, {"top 'data'", "0 1 4 4", "no elements"});
}

// fuzz/net_prototxt (crash-b2b0cf53, from a recurrent seed): a DummyData top with a zero dimension was filled
// during setup, before the Net's check of empty tops, and the constant filler failed CHECK(data_).
TEST(FuzzRegressions, DummyDataWithAnEmptyShape) {
  NetParameter param;
  ReadProtoFromTextString(R"(layer { name: "c0" type: "DummyData" top: "c0"
                                     dummy_data_param { shape { dim: 0 dim: 2 dim: 2 } } })", &param);
  ExpectErrorContaining([&] { Net<float> net(param); }, {"top 'c0'", "0 2 2", "no elements"});
}

// fuzz/datum (crash-a549db36): a Datum of shape 536870911 x 36 x 1342177279 overflowed int64 in the
// element count that was to be checked against INT_MAX (signed overflow, undefined behaviour).
TEST(FuzzRegressions, DatumShapeOverflowingInt64) {
  const std::string bytes("\x08\xff\xff\xff\xff\x01\x10\x24\x18\xff\xff\xff\xff\x04", 14);
  Datum datum;
  ASSERT_TRUE(ParseDatum(bytes, &datum));
  EXPECT_EQ(datum.channels(), 536870911);
  EXPECT_EQ(datum.width(), 1342177279);
  DatumPixels pixels;
  ExpectErrorContaining([&] { pixels.Load(datum); }, {"536870911 x 36 x 1342177279", "too large"});
}

}  // namespace
}  // namespace strata
