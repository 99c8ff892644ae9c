// Net construction and execution: phase filtering, split insertion, in-place layers, parameter sharing,
// hooks, custom layers registered from outside the library, and the errors a bad prototxt gives.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/layer_factory.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {

// A custom layer defined and registered in this file, outside libstrata: loss = 0.5 * sum(x^2).
template <typename Dtype>
class HalfSumSquaresLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit HalfSumSquaresLayer(const LayerParameter& p) : Layer<Dtype>(p) {
    if (this->layer_param_.loss_weight_size() == 0) this->layer_param_.add_loss_weight(1);
  }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->Reshape(std::vector<int>{}); }
  const char* type() const override { return "HalfSumSquares"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {
    top[0]->mutable_cpu_data()[0] = Dtype(0.5) * bottom[0]->sumsq_data();
  }
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& pd, const BlobVec& bottom) override {
    if (!pd[0]) return;
    cpu_scale(bottom[0]->count(), top[0]->cpu_diff()[0], bottom[0]->cpu_data(), bottom[0]->mutable_cpu_diff());
  }
};
REGISTER_LAYER_CLASS(HalfSumSquares);

// Doubles its input in place; counts its calls so the tests can see in-place wiring.
template <typename Dtype>
class DoubleLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }
  const char* type() const override { return "Double"; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {
    cpu_scale(bottom[0]->count(), Dtype(2), bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  }
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& pd, const BlobVec& bottom) override {
    if (pd[0]) cpu_scale(top[0]->count(), Dtype(2), top[0]->cpu_diff(), bottom[0]->mutable_cpu_diff());
  }
};
REGISTER_LAYER_CLASS(Double);

namespace {

NetParameter ParseNet(const std::string& text, Phase phase = TRAIN) {
  NetParameter p;
  ReadProtoFromTextString(text, &p, "test.prototxt");
  p.mutable_state()->set_phase(phase);
  return p;
}

const char* kTwoHeads = R"(
name: "two_heads"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc_a" type: "InnerProduct" bottom: "x" top: "a"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "fc_b" type: "InnerProduct" bottom: "x" top: "b"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "loss_a" type: "HalfSumSquares" bottom: "a" top: "la" }
layer { name: "loss_b" type: "HalfSumSquares" bottom: "b" top: "lb" include { phase: TRAIN } }
)";

TEST(Net, PhaseFiltering) {
  Net<float> train(ParseNet(kTwoHeads, TRAIN));
  Net<float> test(ParseNet(kTwoHeads, TEST));
  EXPECT_TRUE(train.has_layer("loss_b"));
  EXPECT_FALSE(test.has_layer("loss_b"));
  EXPECT_EQ(train.phase(), TRAIN);
  EXPECT_EQ(test.phase(), TEST);
}

TEST(Net, StageAndLevelRules) {
  NetState state;
  state.set_phase(TEST);
  state.set_level(2);
  state.add_stage("deploy");
  NetStateRule rule;
  rule.set_min_level(1);
  EXPECT_TRUE(Net<float>::StateMeetsRule(state, rule, "l"));
  rule.set_max_level(1);
  EXPECT_FALSE(Net<float>::StateMeetsRule(state, rule, "l"));
  NetStateRule stage;
  stage.add_stage("deploy");
  EXPECT_TRUE(Net<float>::StateMeetsRule(state, stage, "l"));
  stage.add_not_stage("deploy");
  EXPECT_FALSE(Net<float>::StateMeetsRule(state, stage, "l"));
}

TEST(Net, SplitInsertedForSharedBottom) {
  Net<float> net(ParseNet(kTwoHeads));
  // "x" feeds two layers, so a Split follows the Input layer.
  ASSERT_EQ(net.layer_names()[1], "x_in_0_split");
  EXPECT_STREQ(net.layers()[1]->type(), "Split");
  EXPECT_EQ(net.top_vecs()[1].size(), 2u);
  // The Split's tops share the input's data.
  auto x = net.blob_by_name("x");
  rng_uniform<float>(x->count(), -1, 1, x->mutable_cpu_data());
  net.Forward();
  EXPECT_EQ(net.top_vecs()[1][0]->cpu_data(), x->cpu_data());
}

TEST(Net, SplitSumsGradients) {
  // Gradient at x must be the sum of both heads' contributions: compare against each head alone.
  NetParameter p = ParseNet(kTwoHeads);
  p.set_force_backward(true);
  Net<double> net(p);
  auto x = net.blob_by_name("x");
  Strata::set_random_seed(3);
  rng_uniform<double>(x->count(), -1, 1, x->mutable_cpu_data());
  net.ForwardBackward();
  std::vector<double> both(x->cpu_diff(), x->cpu_diff() + x->count());
  // d/dx of 0.5|W x|^2 = W^T W x for each head.
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 3; ++k) {
      double expect = 0;
      for (const char* head : {"fc_a", "fc_b"}) {
        const double* W = net.layer_by_name(head)->blobs()[0]->cpu_data();
        const double* b = net.layer_by_name(head)->blobs()[1]->cpu_data();
        for (int o = 0; o < 2; ++o) {
          double y = b[o];
          for (int j = 0; j < 3; ++j) y += W[o * 3 + j] * x->cpu_data()[n * 3 + j];
          expect += W[o * 3 + k] * y;
        }
      }
      EXPECT_NEAR(both[n * 3 + k], expect, 1e-12);
    }
  }
}

TEST(Net, InPlaceLayerReusesBlob) {
  Net<float> net(ParseNet(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 4 } } }
layer { name: "d1" type: "Double" bottom: "x" top: "x" }
layer { name: "d2" type: "Double" bottom: "x" top: "x" }
layer { name: "loss" type: "HalfSumSquares" bottom: "x" top: "l" }
)"));
  EXPECT_EQ(net.blob_names().size(), 2u);  // x and l
  auto x = net.blob_by_name("x");
  cpu_set(4, 1.f, x->mutable_cpu_data());
  float loss = 0;
  net.Forward(&loss);
  EXPECT_FLOAT_EQ(x->cpu_data()[0], 4.f);
  EXPECT_FLOAT_EQ(loss, 0.5f * 4 * 16);
}

TEST(Net, SharedParamsByName) {
  Net<double> net(ParseNet(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "x" top: "y1" param { name: "w" } param { name: "bias" }
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" } } }
layer { name: "fc2" type: "InnerProduct" bottom: "y1" top: "y2" param { name: "w" } param { name: "bias" }
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" } } }
layer { name: "loss" type: "HalfSumSquares" bottom: "y2" top: "l" }
)"));
  EXPECT_EQ(net.params().size(), 4u);
  EXPECT_EQ(net.learnable_params().size(), 2u);
  EXPECT_EQ(net.param_owners()[2], 0);
  EXPECT_EQ(net.param_owners()[3], 1);
  auto& w1 = net.layer_by_name("fc1")->blobs()[0];
  auto& w2 = net.layer_by_name("fc2")->blobs()[0];
  EXPECT_EQ(w1->cpu_data(), w2->cpu_data());
  EXPECT_EQ(w1->cpu_diff(), w2->cpu_diff());
  // The shared weight's gradient is final only after the lower user (fc1, layer 1).
  EXPECT_EQ(net.learnable_params_final_after(1), (std::vector<int>{0, 1}));
  EXPECT_TRUE(net.learnable_params_final_after(2).empty());
  EXPECT_EQ(net.learnable_params_of_layer(2), (std::vector<int>{0, 1}));
  EXPECT_EQ(net.num_learnable_values(), 12u);
}

TEST(Net, SharedParamShapeMismatchIsAnError) {
  EXPECT_THROW(Net<float>(ParseNet(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "x" top: "y1" param { name: "w" }
        inner_product_param { num_output: 3 } }
layer { name: "fc2" type: "InnerProduct" bottom: "y1" top: "y2" param { name: "w" }
        inner_product_param { num_output: 4 } }
)")),
               Error);
}

// Caffe accepts two layers of one name (its mnist_autoencoder has two 'loss' layers): so does Strata, and by name
// the last one is reached, as in Caffe.
TEST(Net, TwoLayersOfOneNameBuildAndTheLastIsFoundByName) {
  Net<float> net(ParseNet(R"(
layer { name: "in" type: "Input" top: "x" top: "t" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "x" bottom: "t" top: "l2" }
layer { name: "loss" type: "Eltwise" bottom: "x" bottom: "t" top: "sum" }
)"));
  EXPECT_EQ(net.num_layers(), 5);  // with the split of x and of t
  EXPECT_STREQ(net.layer_by_name("loss")->type(), "Eltwise");
  float loss = 0;
  net.Forward(&loss);
}

TEST(Net, HooksFireInOrder) {
  Net<float> net(ParseNet(kTwoHeads));
  std::vector<std::string> events;
  net.add_before_forward_hook([&](int i) { events.push_back("bf" + std::to_string(i)); });
  net.add_after_forward_hook([&](int i) { events.push_back("af" + std::to_string(i)); });
  net.add_before_backward_hook([&](int i) { events.push_back("bb" + std::to_string(i)); });
  net.add_after_backward_hook([&](int i) { events.push_back("ab" + std::to_string(i)); });
  net.ForwardBackward();
  std::vector<std::string> expected;
  for (int i = 0; i < net.num_layers(); ++i) {
    expected.push_back("bf" + std::to_string(i));
    expected.push_back("af" + std::to_string(i));
  }
  for (int i = net.num_layers() - 1; i >= 0; --i) {
    expected.push_back("bb" + std::to_string(i));
    expected.push_back("ab" + std::to_string(i));
  }
  EXPECT_EQ(events, expected);
}

TEST(Net, BackwardPruning) {
  Net<float> net(ParseNet(kTwoHeads, TEST));
  // fc_b feeds nothing that is a loss in TEST: no backward for it.
  EXPECT_FALSE(net.layer_need_backward(net.layer_index("fc_b")));
  EXPECT_TRUE(net.layer_need_backward(net.layer_index("fc_a")));
  // The input needs no gradient unless forced.
  EXPECT_FALSE(net.bottom_need_backward()[net.layer_index("fc_a")][0]);
}

TEST(Net, LossWeightScalesLoss) {
  NetParameter p = ParseNet(kTwoHeads, TEST);
  p.mutable_layer(3)->add_loss_weight(3);
  Net<float> weighted(p);
  Net<float> plain(ParseNet(kTwoHeads, TEST));
  plain.ShareTrainedLayersWith(&weighted);
  auto set_input = [](Net<float>& n) { cpu_set(n.blob_by_name("x")->count(), 0.5f, n.blob_by_name("x")->mutable_cpu_data()); };
  set_input(weighted);
  set_input(plain);
  float lw = 0, lp = 0;
  weighted.Forward(&lw);
  plain.Forward(&lp);
  EXPECT_NEAR(lw, 3 * lp, 1e-5);
}

TEST(Net, CopyTrainedLayersAndShapeMismatch) {
  Net<float> a(ParseNet(kTwoHeads));
  NetParameter weights;
  a.ToProto(&weights);
  Net<float> b(ParseNet(kTwoHeads));
  b.CopyTrainedLayersFrom(weights);
  EXPECT_EQ(a.layer_by_name("fc_a")->blobs()[0]->cpu_data()[1], b.layer_by_name("fc_a")->blobs()[0]->cpu_data()[1]);
  // Split layers are not written.
  for (const auto& l : weights.layer()) EXPECT_NE(l.type(), "Split");
  weights.mutable_layer(1)->mutable_blobs(0)->mutable_shape()->set_dim(0, 5);
  EXPECT_THROW(b.CopyTrainedLayersFrom(weights), Error);
}

TEST(Net, LegacyInputFields) {
  Net<float> net(ParseNet(R"(
input: "data" input_shape { dim: 1 dim: 3 }
layer { name: "fc" type: "InnerProduct" bottom: "data" top: "y" inner_product_param { num_output: 2 } }
)"));
  ASSERT_EQ(net.input_blobs().size(), 1u);
  EXPECT_EQ(net.input_blobs()[0]->shape(), (std::vector<int>{1, 3}));
}

// A classifier with labels: a label blob read by a loss and by Accuracy (so it is split), scores likewise.
const char* kClassifier = R"(
name: "classifier"
layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 5 dim: 3 } shape { dim: 5 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "s"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "y" top: "l" }
layer { name: "acc" type: "Accuracy" bottom: "s" bottom: "y" top: "a" }
)";

// The traits that Net, the planner, the solver and the tools ask instead of comparing type strings.
TEST(Net, LayerTraits) {
  Net<float> net(ParseNet(kClassifier));
  const Layer<float>& in = *net.layer_by_name("in");
  EXPECT_TRUE(in.IsBatchSource());
  EXPECT_TRUE(in.IsNetInput());
  EXPECT_FALSE(in.IsSplit());
  const Layer<float>& fc = *net.layer_by_name("fc");
  EXPECT_FALSE(fc.IsBatchSource());
  EXPECT_FALSE(fc.IsNetInput());
  EXPECT_FALSE(fc.IsSplit());
  EXPECT_EQ(fc.LabelBottom(), -1);
  EXPECT_EQ(net.layer_by_name("loss")->LabelBottom(), 1);
  EXPECT_EQ(net.layer_by_name("acc")->LabelBottom(), 1);
  int splits = 0;
  for (const auto& l : net.layers()) splits += l->IsSplit();
  EXPECT_EQ(splits, 2);  // for s and y
}

TEST(Net, InputAndOutputBlobIdsAndBatchSize) {
  Net<float> net(ParseNet(kClassifier));
  ASSERT_EQ(net.input_blob_ids().size(), 2u);
  ASSERT_EQ(net.input_blobs().size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_EQ(net.blobs()[net.input_blob_ids()[k]].get(), net.input_blobs()[k]);
  EXPECT_EQ(net.blob_names()[net.input_blob_ids()[1]], "y");
  ASSERT_EQ(net.output_blob_ids().size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_EQ(net.blobs()[net.output_blob_ids()[k]].get(), net.output_blobs()[k]);
  EXPECT_EQ(net.blob_names()[net.output_blob_ids()[0]], "l");
  EXPECT_EQ(net.batch_size(), 5);
}

// Runs the plain passes itself and counts them: what a pass runner sees of Forward and Backward.
class CountingRunner : public NetPassRunner<float> {
 public:
  float Forward(Net<float>& net) override {
    ++forwards;
    float loss = 0;
    for (int i = 0; i < net.num_layers(); ++i) loss += net.RunLayerForward(i);
    return loss;
  }
  void Backward(Net<float>& net) override {
    ++backwards;
    for (int i = net.num_layers() - 1; i >= 0; --i) net.RunLayerBackward(i);
  }
  int forwards = 0, backwards = 0;
};

TEST(Net, PassRunnerTakesForwardAndBackward) {
  NetParameter p = ParseNet(kTwoHeads);
  p.set_force_backward(true);
  Net<float> net(p), reference(p);
  reference.ShareTrainedLayersWith(&net);
  for (Net<float>* n : {&net, &reference}) {
    cpu_set(n->blob_by_name("x")->count(), 0.5f, n->blob_by_name("x")->mutable_cpu_data());
  }
  int hooks = 0;
  net.add_after_forward_hook([&](int) { ++hooks; });
  net.add_after_backward_hook([&](int) { ++hooks; });
  auto owned = std::make_unique<CountingRunner>();
  const CountingRunner* runner = owned.get();
  net.set_pass_runner(std::move(owned));
  ASSERT_EQ(net.pass_runner(), runner);

  const float loss = net.ForwardBackward();
  EXPECT_EQ(runner->forwards, 1);
  EXPECT_EQ(runner->backwards, 1);
  EXPECT_EQ(hooks, 2 * net.num_layers());  // RunLayerForward and RunLayerBackward fire the hooks
  EXPECT_EQ(loss, reference.ForwardBackward());
  const auto x = net.blob_by_name("x"), ref_x = reference.blob_by_name("x");
  for (int i = 0; i < x->count(); ++i) EXPECT_EQ(x->cpu_diff()[i], ref_x->cpu_diff()[i]);

  net.set_pass_runner(nullptr);  // back to the plain passes
  EXPECT_EQ(net.pass_runner(), nullptr);
  EXPECT_EQ(net.ForwardBackward(), loss);
  EXPECT_EQ(hooks, 4 * net.num_layers());
}

std::string ErrorOf(const std::string& text) {
  try {
    Net<float> net(ParseNet(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NetErrors, UnknownLayerTypeListsKnownTypes) {
  const std::string e = ErrorOf(R"(layer { name: "c" type: "Convolutionn" top: "x" })");
  EXPECT_NE(e.find("unknown type 'Convolutionn'"), std::string::npos) << e;
  EXPECT_NE(e.find("InnerProduct"), std::string::npos) << e;
}

TEST(NetErrors, MissingBottom) {
  const std::string e = ErrorOf(R"(layer { name: "fc" type: "InnerProduct" bottom: "nope" top: "y" })");
  EXPECT_NE(e.find("layer 'fc'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown bottom blob 'nope'"), std::string::npos) << e;
}

TEST(NetErrors, ShapeMismatchNamesLayer) {
  const std::string e = ErrorOf(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 0 } })");
  EXPECT_NE(e.find("layer 'fc' (InnerProduct)"), std::string::npos) << e;
}

TEST(NetErrors, DuplicateTop) {
  const std::string e = ErrorOf(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 } } }
layer { name: "in2" type: "Input" top: "x" input_param { shape { dim: 2 } } })");
  EXPECT_NE(e.find("already produced"), std::string::npos) << e;
}

TEST(NetErrors, MalformedPrototxtGivesLineAndColumn) {
  NetParameter p;
  try {
    ReadProtoFromTextString("name: \"x\"\nlayer {\n  name: \"a\"\n  typo: 3\n}\n", &p, "bad.prototxt");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.prototxt:4:"), std::string::npos) << what;
    EXPECT_NE(what.find("typo"), std::string::npos) << what;
  }
  EXPECT_THROW(ReadProtoFromTextString("layer { name: \"a\" ", &p), Error);
}

TEST(NetErrors, MissingFile) {
  NetParameter p;
  EXPECT_THROW(ReadProtoFromTextFile("/nonexistent/net.prototxt", &p), Error);
  EXPECT_THROW(ReadNetParamsFromBinaryFile("/nonexistent/w.caffemodel", &p), Error);
}

}  // namespace
}  // namespace strata
