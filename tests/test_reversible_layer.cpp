// Reversible (additive-coupling) blocks: gradients against finite differences, a stack that rebuilds its
// inputs against the same stack back-propagating from kept inputs, memory flat in depth, BatchNorm statistics
// updated once, Dropout replayed, and the construction errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "gradient_checker.hpp"
#include "reversible_test_util.hpp"
#include "strata/layers/reversible_layer.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"
#include "strata/onednn.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using namespace reversible_test;

// One branch (F or G) over `half` channels: conv 3x3 (pad 1) then `tail` (layer text using blob "t").
std::string Branch(const std::string& which, const std::string& name, int half, const std::string& tail) {
  std::ostringstream s;
  s << which << " { name: \"" << name << "_" << which << "_conv\" type: \"Convolution\" bottom: \"in\" top: \"t\"\n"
    << "  convolution_param { num_output: " << half << " kernel_size: 3 pad: 1\n"
    << "    weight_filler { type: \"xavier\" } bias_filler { type: \"gaussian\" std: 0.1 } } }\n";
  std::istringstream tails(tail);
  std::string layer;
  int k = 0;
  while (std::getline(tails, layer, ';')) {
    if (layer.empty()) continue;
    s << which << " { name: \"" << name << "_" << which << "_" << k++ << "\" bottom: \"t\" top: \"t\" " << layer
      << " }\n";
  }
  return s.str();
}

// Input x (N x C x H x W) and labels -> conv to C channels -> `blocks` reversible blocks -> ip -> softmax loss.
std::string StackNet(int blocks, int channels, int hw, const std::string& tail, bool verify = false) {
  return StackOfBlocks(blocks, channels, hw, [&](int b) {
    const std::string name = "rev" + std::to_string(b);
    std::ostringstream s;
    s << "layer { name: \"" << name << "\" type: \"Reversible\" bottom: \"x" << b << "\" top: \"x" << b + 1
      << "\"\n  reversible_param { verify: " << (verify ? "true" : "false") << "\n"
      << Branch("f", name, channels / 2, tail) << Branch("g", name, channels / 2, tail) << "  } }\n";
    return s.str();
  });
}

TEST(ReversibleLayer, GradientMatchesFiniteDifferences) {
  // The layer alone (its input is kept), in double: F and G are conv + TanH.
  for (bool verify : {false, true}) {
    NetParameter net = ParseTrainNet(StackNet(1, 4, 4, "type: \"TanH\"", verify));
    LayerParameter p = net.layer(2);
    ASSERT_EQ(p.type(), "Reversible");
    ReversibleLayer<double> layer(p);
    Blob<double> x({2, 4, 4, 4}), y;
    FillUniform(&x, -1.0, 1.0, 5);
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, {&x}, {&y});
    EXPECT_EQ(layer.blobs().size(), 4u);  // F's and G's weights and biases
    EXPECT_EQ(y.shape(), x.shape());
  }
}

TEST(ReversibleLayer, ForwardIsTheCoupling) {
  // y1 = x1 + F(x2), y2 = x2 + G(y1), checked against F and G run as plain layers.
  NetParameter net = ParseTrainNet(StackNet(1, 2, 3, "type: \"TanH\""));
  ReversibleLayer<double> layer(net.layer(2));
  Blob<double> x({2, 2, 3, 3}), y;
  FillUniform(&x, -1.0, 1.0, 9);
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  const double* wf = layer.blobs()[0]->cpu_data();  // 1 x 1 x 3 x 3, one channel in and out
  const double bf = layer.blobs()[1]->cpu_data()[0];
  const double* wg = layer.blobs()[2]->cpu_data();
  const double bg = layer.blobs()[3]->cpu_data()[0];
  auto branch = [](const double* in, const double* w, double b, int i, int j) {
    double s = b;
    for (int di = -1; di <= 1; ++di)
      for (int dj = -1; dj <= 1; ++dj)
        if (i + di >= 0 && i + di < 3 && j + dj >= 0 && j + dj < 3) s += w[(di + 1) * 3 + dj + 1] * in[(i + di) * 3 + j + dj];
    return std::tanh(s);
  };
  for (int n = 0; n < 2; ++n) {
    const double* x1 = x.cpu_data() + n * 18;
    const double* x2 = x1 + 9;
    const double* y1 = y.cpu_data() + n * 18;
    const double* y2 = y1 + 9;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_NEAR(y1[i * 3 + j], x1[i * 3 + j] + branch(x2, wf, bf, i, j), 1e-12);
        EXPECT_NEAR(y2[i * 3 + j], x2[i * 3 + j] + branch(y1, wg, bg, i, j), 1e-12);
      }
    }
  }
}

// The same coupling written with ordinary layers (Slice, Eltwise, Concat), which keep every activation. (Its
// parameters are copied from the reversible net's.)
std::string PlainCouplingNet(int channels, int hw) {
  return StackOfBlocks(1, channels, hw, [&](int) {
    std::ostringstream s;
    auto conv = [&](const std::string& name, const std::string& in, const std::string& out) {
      s << "layer { name: \"" << name << "\" type: \"Convolution\" bottom: \"" << in << "\" top: \"" << out
        << "\" convolution_param { num_output: " << channels / 2 << " kernel_size: 3 pad: 1 } }\n"
        << "layer { name: \"" << name << "_relu\" type: \"ReLU\" bottom: \"" << out << "\" top: \"" << out << "\" }\n";
    };
    s << "layer { name: \"slice\" type: \"Slice\" bottom: \"x0\" top: \"h1\" top: \"h2\" }\n";
    conv("f", "h2", "f");
    s << "layer { name: \"y1\" type: \"Eltwise\" bottom: \"h1\" bottom: \"f\" top: \"y1\" }\n";
    conv("g", "y1", "g");
    s << "layer { name: \"y2\" type: \"Eltwise\" bottom: \"h2\" bottom: \"g\" top: \"y2\" }\n"
      << "layer { name: \"cat\" type: \"Concat\" bottom: \"y1\" bottom: \"y2\" top: \"x1\" }\n";
    return s.str();
  });
}

TEST(ReversibleLayer, EqualsTheCouplingWithStoredActivations) {
  Net<float> rev(ParseTrainNet(StackNet(1, 8, 6, "type: \"ReLU\"")));
  Net<float> plain(ParseTrainNet(PlainCouplingNet(8, 6)));
  ASSERT_EQ(rev.learnable_params().size(), plain.learnable_params().size());
  for (size_t p = 0; p < rev.learnable_params().size(); ++p) {
    plain.learnable_params()[p]->CopyFrom(*rev.learnable_params()[p]);
  }
  FillInputs(&rev);
  FillInputs(&plain);
  float loss_rev = 0, loss_plain = 0;
  rev.ClearParamDiffs();
  plain.ClearParamDiffs();
  rev.Forward(&loss_rev);
  rev.Backward();
  plain.Forward(&loss_plain);
  plain.Backward();
  EXPECT_NEAR(loss_rev, loss_plain, 1e-6 * std::fabs(loss_plain));
  const std::vector<float> a = Gradients(rev), b = Gradients(plain);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::max(1.f, std::fabs(b[i]))) << i;
  // The plain net keeps its 9 activations; the reversible one dropped the block's input after forward.
  EXPECT_FALSE(rev.blob_by_name("x0")->has_data());
  EXPECT_TRUE(plain.blob_by_name("x0")->has_data());
}

// A stack whose blocks rebuild their inputs gives the gradients of the same stack back-propagating from kept
// inputs (verify mode), in float. Dropout inside F and G draws the same masks in the recomputation.
void ExpectStackMatchesKept(int blocks, const std::string& tail, double tolerance) {
  const RebuiltAndKept r =
      CompareRebuiltWithKept([&](bool verify) { return StackNet(blocks, 8, 6, tail, verify); }, 11, 12);
  EXPECT_LT(r.gradient_difference, tolerance) << blocks << " blocks, " << tail;
  // The kept stack measured its reconstruction error; the rebuilt one dropped its inputs after forward.
  auto* last = dynamic_cast<ReversibleLayer<float>*>(r.kept->layer_by_name("rev0").get());
  ASSERT_NE(last, nullptr);
  EXPECT_LT(last->reconstruction_error(), 1e-4);
  EXPECT_FALSE(r.rebuilt->blob_by_name("x1")->has_data());  // dropped after rebuilt's backward, too
}

// Relative difference of all learned gradients between a stack that rebuilds its inputs and the same stack that keeps
// them; prints it, since how it grows with depth is a reported figure (docs/benchmarks.md).
// F and G normalise (conv, BatchNorm, ReLU), as in RevNet: without it the activations grow geometrically with
// depth and y - G(y) cancels catastrophically.
double RebuiltVsKept(int blocks) {
  const std::string tail = "type: \"BatchNorm\" batch_norm_param { use_global_stats: false };type: \"ReLU\"";
  return CompareRebuiltWithKept([&](bool verify) { return StackNet(blocks, 8, 6, tail, verify); }, 21)
      .gradient_difference;
}

TEST(ReversibleLayer, ErrorGrowthWithDepth) {
  const double e8 = RebuiltVsKept(8), e32 = RebuiltVsKept(32), e128 = RebuiltVsKept(128);
  std::printf("reversible stack, relative gradient difference rebuilt vs kept inputs (float): "
              "8 blocks %.2e, 32 blocks %.2e, 128 blocks %.2e\n", e8, e32, e128);
  EXPECT_LT(e8, 1e-5);
  EXPECT_LT(e128, 1e-2);
}

TEST(ReversibleLayer, StackOf8MatchesKeptInputs) {
  ExpectStackMatchesKept(8, "type: \"ReLU\"", 1e-5);
  ExpectStackMatchesKept(8, "type: \"Dropout\" dropout_param { dropout_ratio: 0.3 };type: \"TanH\"", 1e-5);
}

// A second backward on the same forward (K-FAC's true Fisher runs one before the real one): every block rebuilds
// its input again from the same output, so the gradients are the first backward's bit for bit, with BatchNorm and
// Dropout inside the blocks.
TEST(ReversibleLayer, ASecondBackwardGivesTheSameGradients) {
  Strata::set_random_seed(11);
  Net<float> net(ParseTrainNet(StackNet(3, 4, 4,
      "type: \"BatchNorm\" batch_norm_param { use_global_stats: false };type: \"Dropout\" "
      "dropout_param { dropout_ratio: 0.3 };type: \"ReLU\"")));
  FillInputs(&net);
  net.ClearParamDiffs();
  net.ForwardBackward();
  const std::vector<float> first = Gradients(net);
  // Block 1's input went after its producer's backward: the next backward must rebuild it again.
  ASSERT_FALSE(net.blob_by_name("x1")->has_data());
  net.ClearParamDiffs();
  net.BackwardKeepingValues();
  EXPECT_EQ(Gradients(net), first);
  net.ClearParamDiffs();
  net.Backward();
  EXPECT_EQ(Gradients(net), first);
}

TEST(ReversibleLayer, BatchNormStatisticsUpdatedOnce) {
  NetParameter param = ParseTrainNet(StackNet(2, 4, 4,
      "type: \"BatchNorm\" batch_norm_param { use_global_stats: false };type: \"ReLU\""));
  Net<float> net(param);
  FillInputs(&net);
  net.Forward();
  auto stats = [&] {
    std::vector<float> s;
    auto* layer = net.layer_by_name("rev1").get();
    for (int i = 0; i < static_cast<int>(layer->blobs().size()); ++i) {
      if (!layer->ParamIsStatistic(i)) continue;
      s.insert(s.end(), layer->blobs()[i]->cpu_data(), layer->blobs()[i]->cpu_data() + layer->blobs()[i]->count());
    }
    return s;
  };
  const std::vector<float> after_forward = stats();
  ASSERT_EQ(after_forward.size(), 2u * (2 + 2 + 1));  // F's and G's mean, variance (2 channels) and factor
  EXPECT_EQ(after_forward.back(), 1.0f);              // one update of the scale factor
  net.Backward();
  EXPECT_EQ(stats(), after_forward);
  // Statistics are not learned: lr_mult 0, no decay.
  int statistic = 0;
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    if (!net.learnable_param_is_statistic(static_cast<int>(p))) continue;
    ++statistic;
    EXPECT_EQ(net.params_lr()[p], 0.f);
    EXPECT_EQ(net.params_weight_decay()[p], 0.f);
  }
  EXPECT_EQ(statistic, 2 * 2 * 3);
}

// Peak activation bytes of two forward + backward passes of a `blocks`-deep stack: everything the net holds.
size_t PeakBytes(int blocks, bool verify) {
  Strata::set_random_seed(3);
  Net<float> net(ParseTrainNet(StackNet(blocks, 16, 16, "type: \"ReLU\"", verify)));
  const size_t before = MemoryTracker::current(MemoryCategory::kActivation);
  MemoryTracker::reset_peak(MemoryCategory::kActivation);
  FillInputs(&net);
  net.ForwardBackward();
  net.ForwardBackward();
  return MemoryTracker::peak(MemoryCategory::kActivation) - before;
}

TEST(ReversibleLayer, ActivationMemoryFlatInDepth) {
  Strata::set_mode(Strata::CPU);
  const size_t one_block = 16 * 16 * 16 * 2 * sizeof(float);  // one block's input, batch 2
  const size_t r4 = PeakBytes(4, false), r16 = PeakBytes(16, false);
  const size_t k4 = PeakBytes(4, true), k16 = PeakBytes(16, true);
  // Rebuilding: 12 more blocks cost less than one block's input; keeping inputs: at least 12 more inputs.
  EXPECT_LT(r16, r4 + one_block) << r4 << " -> " << r16;
  EXPECT_GE(k16, k4 + 12 * one_block) << k4 << " -> " << k16;
}

// A net's precision reaches the layers inside its blocks, as it reaches its own: with oneDNN's bfloat16 kernels, a BF16
// block's output differs from the float one's by bfloat16's rounding (every layer outside the block kept float).
TEST(ReversibleLayer, TheNetsPrecisionReachesTheBlocksLayers) {
  if (!onednn_has_bf16()) GTEST_SKIP() << "no bfloat16 kernels on this CPU: BF16 computes in float";
  // 16 channels a branch: oneDNN has bfloat16 kernels of its own for that (with 4 it computes in float: onednn.md).
  const NetParameter fp32 = ParseTrainNet(StackNet(1, 32, 6, "type: \"ReLU\""));
  NetParameter bf16 = fp32;
  bf16.set_precision(BF16);
  for (LayerParameter& l : *bf16.mutable_layer()) {
    if (l.type() != "Reversible") l.set_precision(FP32);
  }
  Net<float> want(fp32), got(bf16);
  for (size_t p = 0; p < want.learnable_params().size(); ++p) {
    got.learnable_params()[p]->CopyFrom(*want.learnable_params()[p]);
  }
  FillInputs(&want);
  FillInputs(&got);
  float loss = 0;
  want.Forward(&loss);
  got.Forward(&loss);
  const Blob<float>& a = *want.blob_by_name("x1");
  const Blob<float>& b = *got.blob_by_name("x1");
  EXPECT_EQ(std::vector<float>(want.blob_by_name("x0")->cpu_data(), want.blob_by_name("x0")->cpu_data() + a.count()),
            std::vector<float>(got.blob_by_name("x0")->cpu_data(), got.blob_by_name("x0")->cpu_data() + b.count()))
      << "the stem stayed float";
  double diff = 0, ref = 0;
  for (int i = 0; i < a.count(); ++i) {
    diff += (double(b.cpu_data()[i]) - a.cpu_data()[i]) * (double(b.cpu_data()[i]) - a.cpu_data()[i]);
    ref += double(a.cpu_data()[i]) * a.cpu_data()[i];
  }
  const double err = std::sqrt(diff / ref);
  EXPECT_GT(err, 1e-5) << "the block's convolutions computed in float";
  EXPECT_LT(err, 2e-2);
}

TEST(ReversibleLayer, RevNetModelBuildsAndRuns) {
  // models/revnet with its Data layers swapped for an Input of two images: it builds, runs, and its six blocks
  // drop their inputs.
  NetParameter file;
  ReadNetParamsFromTextFile(std::string(STRATA_SOURCE_DIR) + "/models/revnet/revnet_train_test.prototxt", &file);
  NetParameter param;
  param.set_name(file.name());
  param.mutable_state()->set_phase(TRAIN);
  LayerParameter* input = param.add_layer();
  input->set_name("in");
  input->set_type("Input");
  input->add_top("data");
  input->add_top("label");
  BlobShape* image = input->mutable_input_param()->add_shape();
  for (int d : {2, 1, 28, 28}) image->add_dim(d);
  input->mutable_input_param()->add_shape()->add_dim(2);
  int reversible = 0;
  for (const LayerParameter& l : file.layer()) {
    if (l.type() == "Data") continue;
    *param.add_layer() = l;
    reversible += l.type() == "Reversible";
  }
  EXPECT_EQ(reversible, 6);
  Net<float> net(param);
  FillInputs(&net);
  float loss = 0;
  net.Forward(&loss);
  net.Backward();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(net.blob_by_name("s1_1")->has_data());  // between two blocks: rebuilt, then dropped again
}

TEST(ReversibleLayer, ConstructionErrors) {
  auto error_of = [](const std::string& text) {
    try {
      Net<float> net(ParseTrainNet(text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // 3 channels cannot be split.
  std::string odd = StackNet(1, 3, 4, "type: \"ReLU\"");
  EXPECT_NE(error_of(odd).find("3 channels"), std::string::npos) << error_of(odd);
  // F maps 2 channels to 3.
  std::string widen = StackNet(1, 4, 4, "type: \"ReLU\"");
  widen.replace(widen.find("num_output: 2"), 13, "num_output: 3");
  const std::string e = error_of(widen);
  EXPECT_NE(e.find("same shape"), std::string::npos) << e;
  EXPECT_NE(e.find("'rev0'"), std::string::npos) << e;
  // No G.
  std::string no_g = StackNet(1, 4, 4, "type: \"ReLU\"");
  const size_t g_at = no_g.find("g { ");
  no_g = no_g.substr(0, g_at) + "} }\n" + no_g.substr(no_g.find("layer { name: \"ip\""));
  EXPECT_NE(error_of(no_g).find("no layers"), std::string::npos) << error_of(no_g);
  // In place.
  std::string in_place = StackNet(1, 4, 4, "type: \"ReLU\"");
  for (const std::string from : {"top: \"x1\"", "bottom: \"x1\""}) {
    std::string to = from;
    to[to.size() - 2] = '0';
    in_place.replace(in_place.find(from), from.size(), to);
  }
  EXPECT_NE(error_of(in_place).find("in place"), std::string::npos) << error_of(in_place);
}

}  // namespace
}  // namespace strata
