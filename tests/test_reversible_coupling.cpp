// The general additive coupling of a Reversible block (reversible_param { streams gamma step }): the recurrence
// x_{t+m} = F_t(x_{t+1}, ..., x_{t+m-1}) + gamma x_t against sub-networks run by hand, gradients against finite
// differences, the inverse (exact where the forward's sums are, within the rounding bound elsewhere), a stack that
// rebuilds its inputs against the same stack keeping them, the RevNet block (f, g) bit for bit as it was
// computed before the general coupling, and the construction errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "reversible_test_util.hpp"
#include "strata/layers/reversible_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using namespace reversible_test;

// One step's layers: conv 3x3 (pad 1) to `c` channels, then `tail` (layers on blob "t", separated by ';').
std::string StepLayers(const std::string& name, int c, const std::string& tail) {
  std::ostringstream s;
  s << "layer { name: \"" << name << "_conv\" type: \"Convolution\" bottom: \"in\" top: \"t\"\n"
    << "  convolution_param { num_output: " << c << " kernel_size: 3 pad: 1\n"
    << "    weight_filler { type: \"gaussian\" std: 0.3 } bias_filler { type: \"gaussian\" std: 0.1 } } }\n";
  std::istringstream tails(tail);
  std::string layer;
  for (int k = 0; std::getline(tails, layer, ';');) {
    if (!layer.empty()) s << "layer { name: \"" << name << "_" << k++ << "\" bottom: \"t\" top: \"t\" " << layer << " }\n";
  }
  return s.str();
}

// A Reversible layer "rev" (bottom x, top y) over `m` states of `c` channels with `steps` steps.
std::string CouplingText(int m, double gamma, int steps, int c, const std::string& tail = "type: \"TanH\"",
                         const std::string& name = "rev", const std::string& bottom = "x",
                         const std::string& top = "y", bool verify = false) {
  std::ostringstream s;
  s.precision(17);
  s << "name: \"" << name << "\" type: \"Reversible\" bottom: \"" << bottom << "\" top: \"" << top << "\"\n"
    << "reversible_param { streams: " << m << " gamma: " << gamma << " verify: " << (verify ? "true" : "false")
    << "\n";
  for (int t = 0; t < steps; ++t) s << "step {\n" << StepLayers(name + "_s" + std::to_string(t), c, tail) << "}\n";
  s << "}\n";
  return s.str();
}

LayerParameter ParseLayer(const std::string& text) {
  LayerParameter p;
  ReadProtoFromTextString(text, &p, "coupling_test.prototxt");
  p.set_phase(TRAIN);
  return p;
}

// The sub-network of one step as a net of its own: an Input "in" of `shape`, then `layers`.
template <typename Dtype>
std::unique_ptr<Net<Dtype>> StepNet(const google::protobuf::RepeatedPtrField<LayerParameter>& layers,
                                    const std::vector<int>& shape) {
  NetParameter p;
  p.set_name("step");
  p.set_force_backward(true);
  p.mutable_state()->set_phase(TRAIN);
  LayerParameter* in = p.add_layer();
  in->set_name("in");
  in->set_type("Input");
  in->add_top("in");
  BlobShape* in_shape = in->mutable_input_param()->add_shape();
  for (int d : shape) in_shape->add_dim(d);
  for (const LayerParameter& l : layers) *p.add_layer() = l;
  return std::make_unique<Net<Dtype>>(p);
}

// Copies the layer's parameters (the first step's, then the next's) into the step nets, in that order.
template <typename Dtype>
void CopyParams(Layer<Dtype>& layer, const std::vector<Net<Dtype>*>& nets) {
  size_t next = 0;
  for (Net<Dtype>* net : nets) {
    for (Blob<Dtype>* p : net->learnable_params()) p->CopyFrom(*layer.blobs()[next++]);
  }
  ASSERT_EQ(next, layer.blobs().size());
}

// Values [from, from + len) of every image of a blob with `per_image` values an image, image after image.
template <typename Dtype>
std::vector<Dtype> Slice(const Dtype* data, int images, long per_image, long from, long len) {
  std::vector<Dtype> out;
  for (int n = 0; n < images; ++n) out.insert(out.end(), data + n * per_image + from, data + n * per_image + from + len);
  return out;
}

TEST(ReversibleCoupling, ForwardIsTheRecurrence) {
  // m = 3, gamma = 0.5, 4 steps: the states x_0..x_6; the output is x_4, x_5, x_6.
  const int m = 3, k = 4, c = 2, images = 2, hw = 3;
  const double gamma = 0.5;
  LayerParameter p = ParseLayer(CouplingText(m, gamma, k, c));
  ReversibleLayer<double> layer(p);
  Blob<double> x({images, m * c, hw, hw}), y;
  FillUniform(&x, -1.0, 1.0, 4);
  layer.SetUp({&x}, {&y});
  layer.Forward({&x}, {&y});
  ASSERT_EQ(y.shape(), x.shape());

  const long state = c * hw * hw;
  std::vector<std::vector<double>> states;  // states[i]: x_i of every image
  for (int i = 0; i < m; ++i) states.push_back(Slice(x.cpu_data(), images, m * state, i * state, state));
  std::vector<std::unique_ptr<Net<double>>> nets;
  std::vector<Net<double>*> raw;
  for (int t = 0; t < k; ++t) {
    nets.push_back(StepNet<double>(p.reversible_param().step(t).layer(), {images, (m - 1) * c, hw, hw}));
    raw.push_back(nets.back().get());
  }
  CopyParams(layer, raw);
  for (int t = 0; t < k; ++t) {
    // F_t reads x_{t+1} .. x_{t+m-1} concatenated along channels, oldest first.
    double* in = nets[t]->input_blobs()[0]->mutable_cpu_data();
    for (int n = 0; n < images; ++n) {
      for (int w = 0; w < m - 1; ++w) {
        std::copy_n(states[t + 1 + w].data() + n * state, state, in + (n * (m - 1) + w) * state);
      }
    }
    nets[t]->Forward();
    const double* f = nets[t]->output_blobs()[0]->cpu_data();
    std::vector<double> next(images * state);
    for (long e = 0; e < images * state; ++e) next[e] = f[e] + gamma * states[t][e];
    states.push_back(next);
  }
  for (int i = 0; i < m; ++i) {
    const std::vector<double> got = Slice(y.cpu_data(), images, m * state, i * state, state);
    for (long e = 0; e < images * state; ++e) EXPECT_NEAR(got[e], states[k + i][e], 1e-12) << "state " << k + i;
  }
  EXPECT_EQ(layer.blobs().size(), 2u * k);  // each step's conv weight and bias, step after step
  EXPECT_EQ(layer.blobs()[2]->shape(), (std::vector<int>{c, (m - 1) * c, 3, 3}));
}

// Steps per block that reach every case: fewer steps than streams (input states pass to the output), as many,
// and more (states between input and output, rebuilt in backward).
std::vector<int> StepCounts(int m) { return {m - 1, m, m + 2}; }

TEST(ReversibleCoupling, GradientMatchesFiniteDifferences) {
  // The layer alone (its input kept; the states between are rebuilt), in double, F_t = conv + TanH.
  for (int m : {2, 3, 4}) {
    for (double gamma : {1.0, 0.5, 2.0}) {
      for (int k : StepCounts(m)) {
        SCOPED_TRACE("m " + std::to_string(m) + " gamma " + std::to_string(gamma) + " steps " + std::to_string(k));
        ReversibleLayer<double> layer(ParseLayer(CouplingText(m, gamma, k, 2)));
        Blob<double> x({2, 2 * m, 3, 3}), y;
        FillUniform(&x, -1.0, 1.0, 5);
        GradientChecker<double> checker(1e-4, 1e-6);
        checker.CheckGradient(&layer, {&x}, {&y});
        EXPECT_EQ(layer.blobs().size(), 2u * k);
      }
    }
  }
}

// Rounds every value of a blob to a multiple of 2^-bits in [-limit, limit].
void Dyadic(Blob<double>* b, int bits, double limit) {
  double* v = b->mutable_cpu_data();
  for (int i = 0; i < b->count(); ++i) v[i] = std::ldexp(std::round(std::ldexp(std::clamp(v[i], -limit, limit), bits)), -bits);
}

// Forward, then backward twice with the same output gradient: once reading the kept input, once rebuilding it
// from the output (the bottom dropped, as the Net does). Returns the rebuilt input; `kept_grads` and
// `rebuilt_grads` get the input's and the parameters' gradients of each.
std::vector<double> RebuildInput(ReversibleLayer<double>& layer, Blob<double>& x, Blob<double>& y,
                                 std::vector<double>* kept_grads, std::vector<double>* rebuilt_grads) {
  layer.Forward({&x}, {&y});
  Blob<double> dy(y.shape());
  FillUniform(&dy, -1.0, 1.0, 8);
  std::copy_n(dy.cpu_data(), dy.count(), y.mutable_cpu_diff());
  auto gradients = [&](std::vector<double>* g) {
    for (const auto& p : layer.blobs()) cpu_set(p->count(), 0.0, p->mutable_cpu_diff());
    layer.Backward({&y}, {true}, {&x});
    g->assign(x.cpu_diff(), x.cpu_diff() + x.count());
    for (const auto& p : layer.blobs()) g->insert(g->end(), p->cpu_diff(), p->cpu_diff() + p->count());
  };
  const std::vector<double> input(x.cpu_data(), x.cpu_data() + x.count());
  gradients(kept_grads);
  x.release_memory();
  EXPECT_FALSE(x.has_data());
  gradients(rebuilt_grads);
  std::vector<double> rebuilt(x.cpu_data(), x.cpu_data() + x.count());
  std::copy(input.begin(), input.end(), x.mutable_cpu_data());
  return rebuilt;
}

TEST(ReversibleCoupling, InverseIsExactWhenTheSumsAre) {
  // x_t = (x_{t+m} - F_t) / gamma gives x_t back bit for bit when x_{t+m} = F_t + gamma x_t was computed without
  // rounding: here inputs and weights are short dyadic numbers and F_t = conv + ReLU, so every sum is exact in
  // double, and gamma a power of two scales exactly. The gradients from the rebuilt input are then those from
  // the kept one, bit for bit.
  for (int m : {2, 3, 4}) {
    for (double gamma : {1.0, 0.5, 2.0}) {
      for (int k : StepCounts(m)) {
        SCOPED_TRACE("m " + std::to_string(m) + " gamma " + std::to_string(gamma) + " steps " + std::to_string(k));
        ReversibleLayer<double> layer(ParseLayer(CouplingText(m, gamma, k, 2, "type: \"ReLU\"")));
        Blob<double> x({2, 2 * m, 4, 4}), y;
        FillUniform(&x, -1.0, 1.0, 6);
        Dyadic(&x, 4, 1.0);
        layer.SetUp({&x}, {&y});
        for (const auto& p : layer.blobs()) Dyadic(p.get(), 3, 0.25);
        std::vector<double> kept, rebuilt_grads;
        const std::vector<double> rebuilt = RebuildInput(layer, x, y, &kept, &rebuilt_grads);
        const std::vector<double> input(x.cpu_data(), x.cpu_data() + x.count());
        EXPECT_EQ(rebuilt, input);
        EXPECT_EQ(rebuilt_grads, kept);
      }
    }
  }
}

TEST(ReversibleCoupling, InverseErrorWithinRoundingBound) {
  // In general the rebuilt x_t differs from x_t by the rounding of the coupling. With u the unit roundoff (2^-24
  // in float) and the window exact (one step: the other states pass to the output), to first order
  //   |x_t' - x_t| <= u (c |x_t| + |x_{t+m}| / |gamma|),  c = 1 for gamma a power of two, 3 otherwise
  // (the rounding of F_t + gamma x_t; gamma x_t and the division by gamma round too unless gamma is a power of two).
  const double u = std::ldexp(1.0, -24);
  for (int m : {2, 3, 4}) {
    for (float gamma : {1.0f, 0.5f, 2.0f, 0.3f, 3.0f}) {
      SCOPED_TRACE("m " + std::to_string(m) + " gamma " + std::to_string(gamma));
      ReversibleLayer<float> layer(ParseLayer(CouplingText(m, gamma, 1, 3)));
      Blob<float> x({2, 3 * m, 5, 5}), y;
      FillUniform(&x, -1.0f, 1.0f, 7);
      layer.SetUp({&x}, {&y});
      layer.Forward({&x}, {&y});
      const std::vector<float> input(x.cpu_data(), x.cpu_data() + x.count());
      x.release_memory();
      layer.Backward({&y}, {false}, {&x});
      const bool power_of_two = gamma == 1.0f || gamma == 0.5f || gamma == 2.0f;
      const long state = x.count(1) / m;
      double worst = 0;
      for (int n = 0; n < 2; ++n) {
        for (int i = 0; i < m; ++i) {
          for (long e = 0; e < state; ++e) {
            const long at = (n * m + i) * state + e;
            const double err = std::fabs(double(x.cpu_data()[at]) - input[at]);
            if (i > 0) {
              // x_1 .. x_{m-1} are the output's x_1 .. x_{m-1}, copied.
              EXPECT_EQ(err, 0.0);
              continue;
            }
            const double newest = y.cpu_data()[(n * m + m - 1) * state + e];  // x_m
            const double bound = u * ((power_of_two ? 1 : 3) * std::fabs(input[at]) + std::fabs(newest) / gamma);
            EXPECT_LE(err, bound * (1 + 1e-5)) << "element " << e;
            worst = std::max(worst, err / std::max(bound, 1e-30));
          }
        }
      }
      EXPECT_LE(worst, 1 + 1e-5);
    }
  }
}

TEST(ReversibleCoupling, StackRebuildsLikeKept) {
  // A stack of blocks (m = 3, 4 steps: one state between input and output; conv, BatchNorm, Dropout, ReLU)
  // rebuilding their inputs gives the gradients of the same blocks keeping them, up to the reconstruction's
  // rounding; the BatchNorm statistics move once and Dropout draws the same masks in the recomputation. Each
  // block's input is rebuilt from an output that was itself rebuilt, and dividing by gamma multiplies the error
  // that carries: with gamma = 0.5 the difference grows about tenfold a block (printed), with gamma >= 1 it stays
  // at float rounding.
  const std::string tail =
      "type: \"BatchNorm\";type: \"Dropout\" dropout_param { dropout_ratio: 0.2 };type: \"ReLU\"";
  for (double gamma : {1.0, 0.5, 2.0}) {
    std::vector<double> by_depth;
    for (int blocks = 1; blocks <= 4; ++blocks) {
      const RebuiltAndKept r = CompareRebuiltWithKept(
          [&](bool verify) {
            return StackOfBlocks(blocks, 6, 5, [&](int b) {
              return "layer { " + CouplingText(3, gamma, 4, 2, tail, "rev" + std::to_string(b), "x" + std::to_string(b),
                                               "x" + std::to_string(b + 1), verify) + "}\n";
            });
          },
          31, 32);
      by_depth.push_back(r.gradient_difference);
      EXPECT_FALSE(r.rebuilt->blob_by_name("x0")->has_data());  // dropped, rebuilt, dropped again
      auto* kept = dynamic_cast<ReversibleLayer<float>*>(r.kept->layer_by_name("rev0").get());
      ASSERT_NE(kept, nullptr);
      EXPECT_GT(kept->reconstruction_error(), 0.f);
      EXPECT_LT(kept->reconstruction_error(), 1e-5f);
    }
    std::printf("coupling m 3, 4 steps, gamma %g: relative gradient difference rebuilt vs kept inputs (float), "
                "1-4 blocks: %.2e %.2e %.2e %.2e\n", gamma, by_depth[0], by_depth[1], by_depth[2], by_depth[3]);
    EXPECT_LT(by_depth[3], gamma >= 1 ? 1e-6 : 2e-4) << "gamma " << gamma;
  }
}

// The RevNet block as the layer computed it before the general coupling, written out with F and G as nets of
// their own: y1 = x1 + F(x2), y2 = x2 + G(y1); backward rebuilds x2 = y2 - G(y1), x1 = y1 - F(x2) and
// back-propagates dy2 through G, dy1 + G'^T dy2 through F. Compares forward values, the rebuilt input, the input's
// and the parameters' gradients with the layer's, bit for bit.
template <typename Dtype>
void ExpectRevNetBitIdentical(const LayerParameter& p) {
  const int images = 2, c = 3, hw = 4;
  const long half = c * hw * hw;
  ReversibleLayer<Dtype> layer(p);
  Blob<Dtype> x({images, 2 * c, hw, hw}), y;
  FillUniform(&x, Dtype(-1), Dtype(1), 9);
  layer.SetUp({&x}, {&y});
  const std::vector<Dtype> input(x.cpu_data(), x.cpu_data() + x.count());
  layer.Forward({&x}, {&y});
  Blob<Dtype> dy(y.shape());
  FillUniform(&dy, Dtype(-1), Dtype(1), 10);
  std::copy_n(dy.cpu_data(), dy.count(), y.mutable_cpu_diff());
  x.release_memory();  // as the Net drops it
  for (const auto& b : layer.blobs()) std::fill_n(b->mutable_cpu_diff(), b->count(), Dtype(0));
  layer.Backward({&y}, {true}, {&x});

  const ReversibleParameter& rp = p.reversible_param();
  std::unique_ptr<Net<Dtype>> f = StepNet<Dtype>(rp.f_size() ? rp.f() : rp.step(0).layer(), {images, c, hw, hw});
  std::unique_ptr<Net<Dtype>> g = StepNet<Dtype>(rp.g_size() ? rp.g() : rp.step(1).layer(), {images, c, hw, hw});
  CopyParams<Dtype>(layer, {f.get(), g.get()});
  auto half_of = [&](const Dtype* v, int h) { return Slice(v, images, 2 * half, h * half, half); };
  auto run = [](Net<Dtype>& net, const std::vector<Dtype>& in) {
    std::copy(in.begin(), in.end(), net.input_blobs()[0]->mutable_cpu_data());
    net.Forward();
    const Blob<Dtype>& out = *net.output_blobs()[0];
    return std::vector<Dtype>(out.cpu_data(), out.cpu_data() + out.count());
  };
  auto add = [](const std::vector<Dtype>& a, const std::vector<Dtype>& b, Dtype sign) {
    std::vector<Dtype> s(a.size());
    for (size_t i = 0; i < a.size(); ++i) s[i] = sign > 0 ? a[i] + b[i] : a[i] - b[i];
    return s;
  };
  const std::vector<Dtype> x1 = half_of(input.data(), 0), x2 = half_of(input.data(), 1);
  const std::vector<Dtype> y1 = add(x1, run(*f, x2), 1);
  const std::vector<Dtype> y2 = add(x2, run(*g, y1), 1);
  EXPECT_TRUE(half_of(y.cpu_data(), 0) == y1);
  EXPECT_TRUE(half_of(y.cpu_data(), 1) == y2);
  // Backward from the output alone.
  const std::vector<Dtype> rx2 = add(y2, run(*g, y1), -1);
  const std::vector<Dtype> dy1 = half_of(dy.cpu_data(), 0), dy2 = half_of(dy.cpu_data(), 1);
  std::copy(dy2.begin(), dy2.end(), g->output_blobs()[0]->mutable_cpu_diff());
  g->Backward();
  const std::vector<Dtype> rx1 = add(y1, run(*f, rx2), -1);
  const Blob<Dtype>& g_in = *g->input_blobs()[0];
  const std::vector<Dtype> dx1 = add(dy1, std::vector<Dtype>(g_in.cpu_diff(), g_in.cpu_diff() + g_in.count()), 1);
  std::copy(dx1.begin(), dx1.end(), f->output_blobs()[0]->mutable_cpu_diff());
  f->Backward();
  const Blob<Dtype>& f_in = *f->input_blobs()[0];
  const std::vector<Dtype> dx2 = add(dy2, std::vector<Dtype>(f_in.cpu_diff(), f_in.cpu_diff() + f_in.count()), 1);
  EXPECT_TRUE(half_of(x.cpu_data(), 0) == rx1);
  EXPECT_TRUE(half_of(x.cpu_data(), 1) == rx2);
  EXPECT_TRUE(half_of(x.cpu_diff(), 0) == dx1);
  EXPECT_TRUE(half_of(x.cpu_diff(), 1) == dx2);
  size_t next = 0;
  for (Net<Dtype>* net : {f.get(), g.get()}) {
    for (Blob<Dtype>* q : net->learnable_params()) {
      const Blob<Dtype>& mine = *layer.blobs()[next++];
      EXPECT_TRUE(std::equal(q->cpu_diff(), q->cpu_diff() + q->count(), mine.cpu_diff())) << "parameter " << next - 1;
    }
  }
}

TEST(ReversibleCoupling, RevNetBlockBitIdentical) {
  // f and g (the prototxts written before the general coupling), and the same block written as streams 2,
  // gamma 1 and two steps, compute what the layer computed before, bit for bit, in float and double.
  const std::string fg = CouplingText(2, 1, 2, 3);  // step { layer {...} } x 2 ...
  LayerParameter steps = ParseLayer(fg);
  LayerParameter old_style = steps;
  ReversibleParameter* rp = old_style.mutable_reversible_param();
  rp->clear_streams();
  rp->clear_gamma();
  *rp->mutable_f() = rp->step(0).layer();
  *rp->mutable_g() = rp->step(1).layer();
  rp->clear_step();
  for (const LayerParameter& p : {old_style, steps}) {
    ExpectRevNetBitIdentical<float>(p);
    ExpectRevNetBitIdentical<double>(p);
  }
  // Parameters: F's (weight, bias), then G's, as in the caffemodels written before.
  ReversibleLayer<float> layer(old_style);
  Blob<float> x({1, 6, 4, 4}), y;
  layer.SetUp({&x}, {&y});
  ASSERT_EQ(layer.blobs().size(), 4u);
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{3}));
}

TEST(ReversibleCoupling, ConstructionErrors) {
  auto error_of = [](const std::string& layer, int channels = 6) {
    std::ostringstream s;
    s << "name: \"e\"\nlayer { name: \"in\" type: \"Input\" top: \"x\"\n"
      << "  input_param { shape { dim: 2 dim: " << channels << " dim: 3 dim: 3 } } }\n"
      << "layer { " << layer << "}\n";
    try {
      Net<float> net(ParseTrainNet(s.str()));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_error = [&](const std::string& layer, const std::vector<std::string>& parts, int channels = 6) {
    const std::string e = error_of(layer, channels);
    for (const std::string& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  EXPECT_EQ(error_of(CouplingText(3, 0.5, 2, 2)), "no error");
  expect_error(CouplingText(3, 0, 2, 2), {"'rev'", "gamma is 0"});
  expect_error(CouplingText(1, 1, 2, 6), {"'rev'", "streams is 1", "at least 2"});
  expect_error(CouplingText(0, 1, 2, 6), {"streams is 0"});
  expect_error(CouplingText(4, 1, 2, 2), {"'rev'", "6 channels", "4 equal states"});
  // F_2 maps the two states it reads (4 channels) to 3 channels instead of one state's 2.
  std::string wide = CouplingText(3, 1, 2, 2);
  const size_t second = wide.find("num_output: 2", wide.find("rev_s1_conv"));
  wide.replace(second, 13, "num_output: 3");
  expect_error(wide, {"'rev'", "sub-network step 2", "2 4 3 3", "2 3 3 3", "same shape as one state, 2 2 3 3"});
  // Both ways of writing the steps.
  std::string both = CouplingText(2, 1, 2, 3);
  both.insert(both.find("step {"), "f { name: \"extra\" type: \"ReLU\" bottom: \"in\" top: \"t\" }\n");
  expect_error(both, {"'rev'", "both f/g and step"});
  // No steps at all.
  expect_error(CouplingText(2, 1, 0, 3), {"sub-network f has no layers"});
}

}  // namespace
}  // namespace strata
