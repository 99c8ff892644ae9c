// The pipeline's plan without MPI: grids of ranks, cuts, what crosses each cut, the stage nets and the planner's cuts;
// and every bad input the plan can see, with its message.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "strata/engine/pipeline_plan.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// data -> conv1 -> relu1 (in place) -> b0 -> b1 (Reversible) -> ip1 -> loss(ip1, label); conv1's output also
// feeds `skip`, an Eltwise sum in the last stage, so a blob crosses two cuts.
NetParameter TestNet() {
  NetParameter p;
  ReadProtoFromTextString(R"(
    name: 'plan'
    layer { name: 'data' type: 'Input' top: 'data' top: 'label'
            input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } shape { dim: 2 } } }
    layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'
            convolution_param { num_output: 4 kernel_size: 1 } }
    layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }
    layer { name: 'b0' type: 'Reversible' bottom: 'conv1' top: 'r0'
            reversible_param { f { name: 'b0_f' type: 'Convolution' bottom: 'in' top: 't'
                                   convolution_param { num_output: 2 kernel_size: 1 } }
                               g { name: 'b0_g' type: 'Convolution' bottom: 'in' top: 't'
                                   convolution_param { num_output: 2 kernel_size: 1 } } } }
    layer { name: 'b1' type: 'Reversible' bottom: 'r0' top: 'r1'
            reversible_param { f { name: 'b1_f' type: 'Convolution' bottom: 'in' top: 't'
                                   convolution_param { num_output: 2 kernel_size: 1 } }
                               g { name: 'b1_g' type: 'Convolution' bottom: 'in' top: 't'
                                   convolution_param { num_output: 2 kernel_size: 1 } } } }
    layer { name: 'skip' type: 'Eltwise' bottom: 'r1' bottom: 'conv1' top: 'sum' }
    layer { name: 'ip1' type: 'InnerProduct' bottom: 'sum' top: 'ip1' inner_product_param { num_output: 3 } }
    layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' }
  )", &p);
  return p;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(PipelinePlan, GridPutsTheLastStageOnRankZero) {
  PipelineParameter p;
  p.set_replicas(2);
  const PipelineGrid l0 = PipelineGrid::Of(p, 0, 6);
  EXPECT_EQ(l0.stages, 3);
  EXPECT_EQ(l0.stage, 2);
  EXPECT_EQ(l0.replica, 0);
  const PipelineGrid l4 = PipelineGrid::Of(p, 4, 6);
  EXPECT_EQ(l4.stage, 1);
  EXPECT_EQ(l4.replica, 1);
  EXPECT_EQ(l4.RankOf(1, 1), 4);
  EXPECT_EQ(l4.RankOf(2, 0), 0);
  for (int r = 0; r < 6; ++r) {
    const PipelineGrid l = PipelineGrid::Of(p, r, 6);
    EXPECT_EQ(l.RankOf(l.stage, l.replica), r);
  }
}

TEST(PipelinePlan, StagesTimesReplicasMustBeTheRankCount) {
  PipelineParameter p;
  p.set_stages(3);
  p.set_replicas(2);
  EXPECT_NE(ErrorOf([&] { PipelineGrid::Of(p, 0, 4); }).find("3 stages x 2 replicas, but the job has 4 ranks"),
            std::string::npos);
  p.set_stages(0);
  p.set_replicas(3);
  EXPECT_NE(ErrorOf([&] { PipelineGrid::Of(p, 0, 4); }).find("but the job has 4 ranks"), std::string::npos);
  p.set_stages(2);
  p.set_replicas(1);
  p.add_cut("a");
  p.add_cut("b");
  EXPECT_NE(ErrorOf([&] { PipelineGrid::Of(p, 0, 2); }).find("names 2 cut(s) for 2 stages"), std::string::npos);
}

TEST(PipelinePlan, CrossingsCarryPassThroughBlobsAndSkips) {
  const StageCut cut = CutNet(TestNet(), {"b0", "skip"});
  ASSERT_EQ(cut.stages(), 3);
  EXPECT_EQ(cut.stage_of, (std::vector<int>{0, 0, 0, 1, 1, 2, 2, 2}));
  EXPECT_EQ(cut.source, (std::vector<bool>{true, false, false, false, false, false, false, false}));
  // conv1 (after relu1) goes to b0 and, through stage 1, to skip; label passes through to the loss.
  EXPECT_EQ(cut.cross[0], (std::vector<std::string>{"conv1", "label"}));
  EXPECT_EQ(cut.cross[1], (std::vector<std::string>{"r1", "conv1", "label"}));
  EXPECT_EQ(cut.inputs(0), (std::vector<std::string>{"data", "label"}));
  EXPECT_EQ(cut.inputs(2), cut.cross[1]);
  // Stage 1 is b0, b1 only, but b0 reads conv1, which the stage also sends on (to skip): rebuilding b0's input
  // would lose what it sends, so the stage is not reversible. Stages 0 and 2 have other layers after blocks or none.
  EXPECT_FALSE(cut.reversible(0));
  EXPECT_FALSE(cut.reversible(1));
  EXPECT_FALSE(cut.reversible(2));
  EXPECT_FALSE(CutNet(TestNet(), {"b0", "b1"}).reversible(1));
  // Blobs that only pass through do not count: stage 1 = b1 passes conv1 and label on and rebuilds its input r0;
  // stage 0 = a stem (conv1, relu1) and b0, but it sends conv1, which its own stem makes: not reversible.
  const StageCut other = CutNet(TestNet(), {"b1", "skip"});
  EXPECT_EQ(other.reversible_prefix(1), 0);
  EXPECT_EQ(other.reversible_prefix(0), -1);
  EXPECT_EQ(other.cross[0], (std::vector<std::string>{"r0", "conv1", "label"}));
}

TEST(PipelinePlan, StageNetsReceiveThroughAnInputLayerAndSplitWhatTheyAlsoRead) {
  const NetParameter net = TestNet();
  Net<float> whole(net);
  std::map<std::string, std::vector<int>> shapes;
  for (size_t i = 0; i < whole.blobs().size(); ++i) shapes[whole.blob_names()[i]] = whole.blobs()[i]->shape();
  const StageCut cut = CutNet(net, {"b0", "skip"});
  const StageNets s0 = MakeStageNets(net, cut, 0, shapes);
  ASSERT_EQ(s0.source.layer_size(), 1);
  EXPECT_EQ(s0.source.layer(0).name(), "data");
  EXPECT_EQ(s0.compute.layer(0).type(), "Input");
  EXPECT_FALSE(s0.compute.force_backward());
  // Stage 0 reads conv1 itself (relu1, in place) and sends it: through a Split.
  EXPECT_EQ(s0.send_blobs, (std::vector<std::string>{"conv1@send", "label"}));
  EXPECT_EQ(s0.compute.external_gradient_size(), 2);
  const StageNets s1 = MakeStageNets(net, cut, 1, shapes);
  EXPECT_EQ(s1.source.layer_size(), 0);
  EXPECT_TRUE(s1.compute.force_backward());
  // b0 reads conv1 and stage 1 sends it on: a Split; label only passes through.
  EXPECT_EQ(s1.send_blobs, (std::vector<std::string>{"r1", "conv1@send", "label"}));
  // Every stage net builds, with the shapes of the whole net at its boundary.
  for (int s = 0; s < 3; ++s) {
    Net<float> stage(MakeStageNets(net, cut, s, shapes).compute);
    for (const std::string& b : cut.inputs(s)) EXPECT_EQ(stage.blob_by_name(b)->shape(), shapes[b]) << b;
  }
}

// A stage computes as the whole net would: its nets keep the net's precision (a BF16 run's stages once
// computed in float) and debug_info.
TEST(PipelinePlan, StageNetsKeepTheNetsSettings) {
  NetParameter net = TestNet();
  net.set_precision(BF16);
  net.set_debug_info(true);
  std::map<std::string, std::vector<int>> shapes;
  Net<float> whole(TestNet());
  for (size_t i = 0; i < whole.blobs().size(); ++i) shapes[whole.blob_names()[i]] = whole.blobs()[i]->shape();
  const StageCut cut = CutNet(net, {"b0", "skip"});
  for (int s = 0; s < 3; ++s) {
    const StageNets stage = MakeStageNets(net, cut, s, shapes);
    EXPECT_EQ(stage.compute.precision(), BF16) << "stage " << s;
    EXPECT_TRUE(stage.compute.debug_info()) << "stage " << s;
    if (s == 0) {
      EXPECT_EQ(stage.source.precision(), BF16);
    }
  }
  net.clear_precision();
  EXPECT_FALSE(MakeStageNets(net, cut, 1, shapes).compute.has_precision());
}

TEST(PipelinePlan, BadCutsAreOneClearErrorEach) {
  const NetParameter net = TestNet();
  EXPECT_NE(ErrorOf([&] { CutNet(net, {"b0_f"}); }).find("inside the Reversible block 'b0'"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { CutNet(net, {"nope"}); }).find("has no layer of that name"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { CutNet(net, {"skip", "b0"}); }).find("does not come after the previous cut"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { CutNet(net, {"conv1"}); }).find("holds no layer to compute (only data layers)"),
            std::string::npos);
  const std::vector<std::string> nine(8, "conv1");
  EXPECT_NE(ErrorOf([&] { CutNet(net, nine); }).find("fewer than the 9 pipeline stages"), std::string::npos);
  std::vector<double> cost(static_cast<size_t>(net.layer_size()), 1.0);
  const std::vector<double> no_memory(cost.size(), 0);
  EXPECT_NE(ErrorOf([&] { PlanCuts(net, cost, no_memory, 8); }).find("7 layers to compute, fewer than the 8"),
            std::string::npos);
}

TEST(PipelinePlan, PlannerBalancesTheSlowestStage) {
  const NetParameter net = TestNet();
  //                       data conv1 relu1 b0  b1  skip ip1 loss
  const std::vector<double> cost{5, 4, 0.5, 4, 3, 1, 1, 1};
  const std::vector<double> no_memory(cost.size(), 0);
  // Two stages: before b0 gives 9.5 | 10, the best (before relu1: 9 | 10.5; before b1: 13.5 | 6).
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 2), (std::vector<std::string>{"b0"}));
  // Three: 9 | 4.5 | 6 (data and conv1 alone, then relu1 and b0): the data layer stays in stage 0.
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 3), (std::vector<std::string>{"relu1", "b1"}));
  // Seven stages for seven compute layers: one each.
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 7).size(), 6u);
  // Memory counts too: with b0 holding most of it, a cut before b0 would leave b0, b1 (80% of the memory) together;
  // cutting before b1 instead gives shares (time 13.5/19.5 = 69%, memory 70%) | (31%, 30%) against (49%, 0%) |
  // (51%, 100%).
  //                           data conv1 relu1 b0  b1  skip ip1 loss
  const std::vector<double> bytes{0, 0, 0, 70, 10, 10, 5, 5};
  EXPECT_EQ(PlanCuts(net, cost, bytes, 2), (std::vector<std::string>{"b1"}));
}

// What a cut before each layer sends: for every cut, the blobs CutNet finds crossing it (FinishCut's rule, written
// apart), and by hand.
TEST(PipelinePlan, CrossingBytesAreWhatEachCutSends) {
  const NetParameter net = TestNet();
  // Powers of two, so that each sum names its blobs.
  const std::map<std::string, double> bytes{{"data", 1},  {"label", 2}, {"conv1", 4}, {"r0", 8},
                                            {"r1", 16},   {"sum", 32},  {"ip1", 64},  {"loss", 128}};
  //   before:  data conv1 relu1 b0 b1  skip ip1 loss (end)
  // conv1 crosses from its writer to relu1, relu1's version on to b0 and skip; label passes to the loss.
  EXPECT_EQ(CrossingBytes(net, bytes), (std::vector<double>{0, 1 + 2, 4 + 2, 4 + 2, 8 + 4 + 2, 16 + 4 + 2, 32 + 2,
                                                            64 + 2, 0}));
  const std::vector<double> crossing = CrossingBytes(net, bytes);
  for (int c = 2; c < net.layer_size(); ++c) {  // a cut before conv1 would leave stage 0 only data
    const StageCut cut = CutNet(net, {net.layer(c).name()});
    double sent = 0;
    for (const std::string& b : cut.cross[0]) sent += bytes.at(b);
    EXPECT_EQ(crossing[static_cast<size_t>(c)], sent) << "a cut before " << net.layer(c).name();
  }
}

// A link's cost moves a cut: the skip connection makes conv1 cross every cut up to the sum.
TEST(PipelinePlan, PlannerChargesACutForWhatItSends) {
  const NetParameter net = TestNet();
  //                       data conv1 relu1 b0 b1 skip ip1 loss
  const std::vector<double> cost{1, 1, 1, 1, 1, 4, 1, 1};
  const std::vector<double> no_memory(cost.size(), 0);
  // Time alone: before skip, 5 | 6 (before ip1: 9 | 2).
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 2), (std::vector<std::string>{"skip"}));
  const std::map<std::string, double> bytes{{"data", 1}, {"label", 1}, {"conv1", 100}, {"r0", 1},
                                            {"r1", 1},   {"sum", 1},   {"ip1", 1},     {"loss", 1}};
  CutCosts links{CrossingBytes(net, bytes), {0.02}};
  // Before skip each side also sends and receives 102 bytes both ways (4.08): 9.08 | 10.08; before ip1, 2 bytes
  // (0.08): 9.08 | 2.08.
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 2, links), (std::vector<std::string>{"ip1"}));
  links.ms_per_byte = {0};  // a free link changes nothing
  EXPECT_EQ(PlanCuts(net, cost, no_memory, 2, links), (std::vector<std::string>{"skip"}));
  // Three stages, each link its own cost: a slow second link keeps its cut past the sum, where 2 bytes cross (5.08
  // at most either way: 4 | 5.08 | 2.08 or 5 | 5.08 | 1.08).
  links.ms_per_byte = {0, 0.02};
  const std::vector<std::string> three = PlanCuts(net, cost, no_memory, 3, links);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_TRUE(three[1] == "ip1" || three[1] == "loss") << three[1];
  links.ms_per_byte = {0.02};
  EXPECT_NE(ErrorOf([&] { PlanCuts(net, cost, no_memory, 3, links); }).find("links for"), std::string::npos);
}

TEST(PipelinePlan, TestNetsAreCutLikeTheTrainNet) {
  NetParameter train = TestNet();
  NetParameter test = TestNet();
  LayerParameter* acc = test.add_layer();
  acc->set_name("accuracy");
  acc->set_type("Accuracy");
  acc->add_bottom("ip1");
  acc->add_bottom("label");
  acc->add_top("accuracy");
  const StageCut cut = CutNet(train, {"b0", "skip"});
  const StageCut like = CutLike(test, cut);
  EXPECT_EQ(like.stage_of.back(), 2);  // the test-only layer goes where its inputs are
  EXPECT_EQ(like.cross, cut.cross);
}

}  // namespace
}  // namespace strata
