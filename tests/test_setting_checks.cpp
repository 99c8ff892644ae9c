// Settings that would train wrongly while looking right are refused before the first iteration, one message each
// (strata/setting_checks.hpp, docs/reliability.md); a run that diverges or is interrupted inside a long iteration
// ends as promised.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "data_test_util.hpp"
#include "strata/net.hpp"
#include "strata/setting_checks.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::Replace;
using testing_data::TempDir;

// A small classifier: x (4 x 3) -> ip (4 x 5) -> relu in place -> softmax loss with labels y.
const char* kNet = R"(name: "checked"
layer { name: "in" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "z" top: "z" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" }
)";


NetParameter NetText(const std::string& text) {
  NetParameter p;
  ReadProtoFromTextString(text, &p);
  p.mutable_state()->set_phase(TRAIN);
  return p;
}

SolverParameter SolverText(const std::string& extra, const std::string& net = kNet) {
  SolverParameter p;
  ReadProtoFromTextString("type: 'SGD' " + extra, &p);
  if (!p.has_base_lr()) p.set_base_lr(0.01f);
  if (!p.has_max_iter()) p.set_max_iter(2);
  if (!p.has_snapshot_after_train()) p.set_snapshot_after_train(false);
  ReadProtoFromTextString(net, p.mutable_net_param());
  return p;
}

void ExpectNetError(const std::string& text, const std::vector<std::string>& parts) {
  SCOPED_TRACE(text);
  ExpectErrorContaining([&] { Net<float> net(NetText(text)); }, parts);
}

void ExpectSolverError(const SolverParameter& param, const std::vector<std::string>& parts) {
  SCOPED_TRACE(param.DebugString());
  ExpectErrorContaining([&] { SolverRegistry<float>::Create(param); }, parts);
}

TEST(SettingChecks, TheBaseNetAndSolverAreAccepted) {
  Net<float> net(NetText(kNet));
  auto solver = SolverRegistry<float>::Create(SolverText(""));
  solver->Solve();
  EXPECT_EQ(solver->iter(), 2);
}

TEST(SettingChecks, SolverSettings) {
  ExpectSolverError(SolverText("base_lr: -0.01", kNet), {"base_lr is -0.01", "ascends the loss"});
  ExpectSolverError(SolverText("lr_policy: 'multistep' gamma: 0.1 stepvalue: 100 stepvalue: 50"),
                    {"stepvalue must increase", "entry 2 (50) follows 100"});
  ExpectSolverError(SolverText("lr_policy: 'multistep' gamma: 0.1 stepvalue: 100 stepvalue: 100"),
                    {"stepvalue must increase"});
  // Test layers and a test interval, but no test_iter: Caffe would build no test net and never test.
  const std::string with_test = std::string(kNet) +
      "layer { name: 'acc' type: 'Accuracy' bottom: 'z' bottom: 'y' top: 'acc' include { phase: TEST } }\n";
  ExpectSolverError(SolverText("test_interval: 10", with_test),
                    {"test_interval is 10", "'checked' has test-phase layers", "no test_iter"});
  auto tested = SolverRegistry<float>::Create(SolverText("test_interval: 10 test_iter: 1", with_test));
  EXPECT_EQ(tested->test_nets().size(), 1u);
  // Without test layers, test_interval has nothing to run: Caffe's meaning, accepted.
  SolverRegistry<float>::Create(SolverText("test_interval: 10"));
}

// NaN and infinity, wherever a number is read: the solver's own fields and every layer's (fillers, lr_mult,
// BatchNorm's eps and the like), found by walking the parsed messages.
TEST(SettingChecks, NonFiniteNumbersAreRefused) {
  for (const char* field : {"momentum: nan", "weight_decay: inf", "base_lr: nan", "clip_gradients: -inf",
                            "delta: nan", "momentum2: inf"}) {
    ExpectSolverError(SolverText(field), {"solver: ", std::string(field).substr(0, std::string(field).find(':')),
                                          "must be a finite number"});
  }
  ExpectNetError(Replace(kNet, "std: 0.1", "std: inf"),
                 {"layer 'ip' (InnerProduct): inner_product_param.weight_filler.std is inf", "finite"});
  ExpectNetError(Replace(kNet, "inner_product_param {", "param { lr_mult: nan } inner_product_param {"),
                 {"layer 'ip' (InnerProduct): param[0].lr_mult is nan"});
  ExpectNetError(Replace(kNet, "layer { name: \"loss\"",
                         "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"z\" top: \"z2\" "
                         "batch_norm_param { eps: nan } }\nlayer { name: \"loss\""),
                 {"layer 'bn' (BatchNorm): batch_norm_param.eps is nan"});
  ExpectNetError(Replace(kNet, "value: 1 }", "value: -inf }"),
                 {"layer 'in' (DummyData): dummy_data_param.data_filler[1].value is -inf"});
}

TEST(SettingChecks, LayerSettings) {
  const std::string bn = Replace(kNet, "layer { name: \"loss\"",
                                 "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"z\" top: \"z\" "
                                 "batch_norm_param { moving_average_fraction: 1.5 } }\nlayer { name: \"loss\"");
  ExpectNetError(bn, {"layer 'bn' (BatchNorm): batch_norm_param.moving_average_fraction is 1.5", "[0, 1]"});
  ExpectNetError(Replace(bn, "moving_average_fraction: 1.5", "eps: -1e-5"),
                 {"batch_norm_param.eps is -1e-05", "must not be negative"});
  Net<float> eps0(NetText(Replace(bn, "moving_average_fraction: 1.5", "eps: 0")));  // Caffe's, with a warning
  Net<float> fine(NetText(Replace(bn, "moving_average_fraction: 1.5", "moving_average_fraction: 1")));

  ExpectNetError("name: 'p' layer { name: 'w' type: 'Parameter' top: 'w' parameter_param { shape { dim: 3 dim: 0 } } }",
                 {"layer 'w' (Parameter): parameter_param.shape has dimension 1 = 0", "positive"});

  // Reversible: 1 / gamma per rebuilt step. The RevNet form has 2 steps over 2 streams: one division.
  const std::string rev = R"(name: "rev"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } } }
layer { name: "block" type: "Reversible" bottom: "x" top: "y"
        reversible_param { gamma: GAMMA
          f { name: "f" type: "Convolution" bottom: "in" top: "out"
              convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
          g { name: "g" type: "Convolution" bottom: "in" top: "out"
              convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } } } }
)";
  ExpectNetError(Replace(rev, "GAMMA", "1e-30"),
                 {"layer 'block' (Reversible)", "reversible_param.gamma is 1e-30", "amplifying rounding errors",
                  "use |gamma| >= 0.000244"});
  Net<float> rev_ok(NetText(Replace(rev, "GAMMA", "0.01")));  // 100x: 7 of float's 24 bits lost at worst
}

TEST(SettingChecks, LayerNamesWithParametersAreUnique) {
  // Two InnerProducts named 'ip': a snapshot would load one's weights into the other.
  ExpectNetError(Replace(Replace(kNet, "layer { name: \"relu\"",
                                 "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"z\" top: \"z1\" "
                                 "inner_product_param { num_output: 5 } }\nlayer { name: \"relu\""),
                         "type: \"ReLU\" bottom: \"z\" top: \"z\"", "type: \"ReLU\" bottom: \"z1\" top: \"z1\""),
                 {"net 'checked': 2 layers are named 'ip' (InnerProduct, InnerProduct)", "one would load into another"});
  // Without parameters (Caffe's mnist_autoencoder names two loss layers 'loss'): accepted, with a warning.
  Net<float> twice(NetText(Replace(kNet, "top: \"loss\" }",
                                   "top: \"loss\" }\nlayer { name: \"loss\" type: \"Accuracy\" bottom: \"z\" "
                                   "bottom: \"y\" top: \"acc\" }")));
  EXPECT_EQ(twice.num_layers(), 7);  // with the two Splits
}

// The general rule (Layer::BackwardWorksInPlace): in place, a layer whose backward reads its bottom's data would
// read its own output instead.
TEST(SettingChecks, InPlaceOnlyWhereBackwardAllowsIt) {
  std::string in_place = Replace(kNet, "bottom: \"x\" top: \"z\"", "bottom: \"x\" top: \"x\"");
  in_place = Replace(Replace(in_place, "bottom: \"z\" top: \"z\"", "bottom: \"x\" top: \"x\""), "bottom: \"z\" bottom", "bottom: \"x\" bottom");
  ExpectNetError(in_place,
                 {"layer 'ip' (InnerProduct) runs in place (top 'x' is its bottom)", "give it its own top blob"});
  // Layers made to run in place: element-wise on the top (ReLU, Sigmoid, TanH, Dropout, BatchNorm) or keeping a
  // copy of the input (Scale, PReLU).
  for (const char* layer : {"type: \"Sigmoid\"", "type: \"TanH\"", "type: \"Dropout\"", "type: \"BatchNorm\"",
                            "type: \"Scale\" scale_param { bias_term: true }", "type: \"PReLU\"", "type: \"ELU\""}) {
    Net<float> net(NetText(Replace(kNet, "type: \"ReLU\"", layer)));
  }
  ExpectNetError(Replace(kNet, "type: \"ReLU\"", "type: \"AbsVal\""), {"layer 'relu' (AbsVal) runs in place"});
  ExpectNetError(Replace(kNet, "type: \"ReLU\"", "type: \"ReLU\" relu_param { negative_slope: -0.5 }"),
                 {"layer 'relu' (ReLU) runs in place"});
}

TEST(SettingChecks, IterSizeBeyondAFloatSumIsRefused) {
  ExpectSolverError(SolverText("iter_size: 2000000000"),
                    {"iter_size 2000000000 x 1 replica(s)", "2^24 = 16777216"});
  EXPECT_NO_THROW(CheckGradientContributions(1, 1 << 24));
  ExpectErrorContaining([] { CheckGradientContributions(2, 1 << 23 | 1); }, {"x 2 replica(s)"});
}

// Weights that are not finite when training ends (the last update diverged while the loss it followed was still
// finite) end the run with an Error naming the layer, and the final snapshot is not written.
TEST(SettingChecks, NonFiniteWeightsEndTheRunWithoutASnapshot) {
  TempDir dir;
  auto solver = SolverRegistry<float>::Create(
      SolverText("max_iter: 0 snapshot_after_train: true snapshot_prefix: '" + dir / "snap" + "'"));
  solver->net()->layer_by_name("ip")->blobs()[0]->mutable_cpu_data()[1] = std::numeric_limits<float>::infinity();
  ExpectErrorContaining([&] { solver->Solve(); }, {"the weights are not finite at iteration 0", "layer 'ip', blob 0"});
  EXPECT_FALSE(std::filesystem::exists(dir / "snap_iter_0.caffemodel"));
  // A snapshot of non-finite weights is refused itself, whoever asks for it.
  NetParameter weights;
  solver->net()->ToProto(&weights);
  ExpectErrorContaining([&] { RequireFiniteWeights(weights, 7); },
                        {"not finite at iteration 7", "layer 'ip', blob 0", "no snapshot was written"});
}

// SIGINT/SIGTERM inside an iteration of many micro-batches: polled after each, the iteration is dropped (no update)
// and Solve ends at once without a final snapshot, whatever iter_size is.
TEST(SettingChecks, AStopIsHonouredWithinOneMicroBatch) {
  TempDir dir;
  SolverParameter p = SolverText("iter_size: 16000000 max_iter: 3 snapshot_after_train: true snapshot_prefix: '" +
                                 dir / "snap" + "'");
  auto solver = SolverRegistry<float>::Create(p);
  int polls = 0;
  solver->SetActionFunction([&polls] { return ++polls == 5 ? SignalAction::kStop : SignalAction::kNone; });
  std::vector<float> before;
  for (const auto& b : solver->net()->learnable_params()) before.insert(before.end(), b->cpu_data(), b->cpu_data() + b->count());
  solver->Solve();
  // Polled at the start of iteration 0, then after each of 4 micro-batches.
  EXPECT_EQ(polls, 5);
  EXPECT_EQ(solver->iter(), 0);
  std::vector<float> after;
  for (const auto& b : solver->net()->learnable_params()) after.insert(after.end(), b->cpu_data(), b->cpu_data() + b->count());
  EXPECT_EQ(before, after) << "the dropped iteration updated the weights";
  EXPECT_FALSE(std::filesystem::exists(dir / "snap_iter_0.caffemodel"));
}

}  // namespace
}  // namespace strata
