// Caffe's recurrent layers: LSTMUnit, LSTM and RNN. Hand-worked steps, the state carried between forwards (and
// kept by a re-run), LSTM against chained LSTMUnit steps, finite-difference gradients of every bottom but cont
// and of every parameter, Caffe's parameter layout, the bad configurations, and a net built from prototxt.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/lstm_layer.hpp"
#include "strata/layers/rnn_layer.hpp"
#include "strata/net.hpp"
#include "strata/recompute/executor.hpp"
#include "strata/recompute/graph.hpp"
#include "strata/recompute/planner.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

// A recurrent layer's parameter: type "LSTM" or "RNN", gaussian weights and uniform biases unless given.
LayerParameter RecurrentParam(const std::string& type, int num_output, bool expose_hidden = false,
                              const std::string& fillers =
                                  "weight_filler { type: 'gaussian' std: 0.5 } "
                                  "bias_filler { type: 'uniform' min: -0.5 max: 0.5 }") {
  LayerParameter p;
  ReadProtoFromTextString("name: 'rec' type: '" + type +
                              "' recurrent_param { num_output: " + std::to_string(num_output) +
                              (expose_hidden ? " expose_hidden: true " : " ") + fillers + " }",
                          &p);
  return p;
}

LayerParameter UnitParam() {
  LayerParameter p;
  p.set_name("unit");
  p.set_type("LSTMUnit");
  return p;
}

template <typename Dtype>
void Set(Blob<Dtype>* b, const std::vector<double>& v) {
  ASSERT_EQ(b->count(), static_cast<int>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) b->mutable_cpu_data()[i] = static_cast<Dtype>(v[i]);
}

// Owns a layer's bottoms and tops.
template <typename Dtype>
struct Blobs {
  std::vector<std::unique_ptr<Blob<Dtype>>> owned;
  std::vector<Blob<Dtype>*> bottom, top;
  Blobs(const std::vector<std::vector<int>>& shapes, int tops, unsigned seed = 5) {
    for (size_t b = 0; b < shapes.size(); ++b) {
      owned.emplace_back(new Blob<Dtype>(shapes[b]));
      FillUniform(owned.back().get(), Dtype(-1), Dtype(1), seed + static_cast<unsigned>(b));
      bottom.push_back(owned.back().get());
    }
    for (int t = 0; t < tops; ++t) {
      owned.emplace_back(new Blob<Dtype>());
      top.push_back(owned.back().get());
    }
  }
};

// cont with sequence starts inside the batch: 0 at (t, n) when (t + n) % 3 == 1.
template <typename Dtype>
void FillCont(Blob<Dtype>* cont) {
  const int N = cont->shape(1);
  for (int k = 0; k < cont->count(); ++k) cont->mutable_cpu_data()[k] = ((k / N + k % N) % 3 == 1) ? 0 : 1;
}

std::vector<double> Values(const Blob<double>& b) { return {b.cpu_data(), b.cpu_data() + b.count()}; }

// ---------------------------------------------------------------- LSTMUnit

TEST(LSTMUnitLayer, HandWorkedForwardBackward) {
  // H = 1, two streams with the same gate inputs x = [x_i, x_f, x_o, x_g] = [0, ln 3, -ln 3, ln 3]:
  //   i = sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, o = sigmoid(-ln 3) = 1/4, g = tanh(ln 3) = (9-1)/(9+1) = 4/5.
  // Stream 0, cont 1, c_prev = (ln 3 - 2/5) / (3/4) = 0.93148305: f = 3/4, c = 3/4 c_prev + 1/2 * 4/5 = ln 3,
  //   h = o tanh(c) = 1/4 * 4/5 = 1/5.
  // Stream 1, cont 0, c_prev = 5 (dropped): f = 0, c = i g = 2/5, h = 1/4 tanh(2/5) = 0.09498724.
  // Backward with dc = dh = 1. Stream 0: dc_total = dc + dh o (1 - tanh(c)^2) = 1 + 1/4 * 9/25 = 1.09;
  //   dc_prev = 1.09 * 3/4 = 0.8175; dx_i = 1.09 g i (1 - i) = 0.218; dx_f = 1.09 c_prev f (1 - f) = 0.19037185;
  //   dx_o = dh tanh(c) o (1 - o) = 4/5 * 3/16 = 0.15; dx_g = 1.09 i (1 - g^2) = 0.1962.
  // Stream 1: dc_total = 1 + 1/4 (1 - tanh(2/5)^2) = 1.21390970; dc_prev = 0; dx_i = dc_total * 4/5 * 1/4 =
  //   0.24278194; dx_f = 0; dx_o = tanh(2/5) * 3/16 = 0.07124043; dx_g = dc_total * 1/2 * 9/25 = 0.21850375.
  const double l3 = std::log(3.0);
  auto run = [&](auto zero, double tol) {
    using T = decltype(zero);
    Blob<T> c_prev({1, 2, 1}), x({1, 2, 4}), cont({1, 2}), c, h;
    Set(&c_prev, {(l3 - 0.4) / 0.75, 5});
    Set(&x, {0, l3, -l3, l3, 0, l3, -l3, l3});
    Set(&cont, {1, 0});
    LSTMUnitLayer<T> layer(UnitParam());
    layer.SetUp({&c_prev, &x, &cont}, {&c, &h});
    ASSERT_EQ(c.shape(), c_prev.shape());
    ASSERT_EQ(h.shape(), c_prev.shape());
    layer.Forward({&c_prev, &x, &cont}, {&c, &h});
    EXPECT_NEAR(c.cpu_data()[0], l3, tol);
    EXPECT_NEAR(h.cpu_data()[0], 0.2, tol);
    EXPECT_NEAR(c.cpu_data()[1], 0.4, tol);
    EXPECT_NEAR(h.cpu_data()[1], 0.09498724056380622, tol);
    cpu_set(2, T(1), c.mutable_cpu_diff());
    cpu_set(2, T(1), h.mutable_cpu_diff());
    layer.Backward({&c, &h}, {true, true, false}, {&c_prev, &x, &cont});
    const double dx[] = {
        0.218, 0.19037184866205992, 0.15, 0.1962, 0.2427819393040589, 0, 0.07124043042285466, 0.218503745373653};
    for (int k = 0; k < 8; ++k) EXPECT_NEAR(x.cpu_diff()[k], dx[k], tol) << k;
    EXPECT_NEAR(c_prev.cpu_diff()[0], 0.8175, tol);
    EXPECT_NEAR(c_prev.cpu_diff()[1], 0, tol);
  };
  run(0.0, 1e-12);
  run(0.0f, 1e-6);
}

TEST(LSTMUnitLayer, GradientCheck) {
  for (bool all_continue : {false, true}) {
    Blobs<double> b({{1, 3, 4}, {1, 3, 16}, {1, 3}}, 2);
    Set(b.bottom[2], all_continue ? std::vector<double>{1, 1, 1} : std::vector<double>{1, 0, 1});
    LSTMUnitLayer<double> layer(UnitParam());
    GradientChecker<double> checker(1e-4, 1e-6);
    checker.CheckGradient(&layer, b.bottom, b.top, 0);
    checker.CheckGradient(&layer, b.bottom, b.top, 1);
    EXPECT_EQ(checker.last_num_checked(), 48);
  }
}

TEST(LSTMUnitLayer, RefusesBadShapesAndContGradient) {
  auto setup = [](const std::vector<std::vector<int>>& shapes) {
    Blobs<double> b(shapes, 2);
    LSTMUnitLayer<double> layer(UnitParam());
    layer.SetUp(b.bottom, b.top);
  };
  EXPECT_NO_THROW(setup({{1, 2, 3}, {1, 2, 12}, {1, 2}}));
  EXPECT_THROW(setup({{1, 2, 3}, {1, 2, 11}}), Error);             // two bottoms
  EXPECT_THROW(setup({{1, 2, 3}, {1, 2, 9}, {1, 2}}), Error);      // x is not 4 H wide
  EXPECT_THROW(setup({{2, 2, 3}, {2, 2, 12}, {2, 2}}), Error);     // more than one time step
  EXPECT_THROW(setup({{1, 2, 3}, {1, 3, 12}, {1, 2}}), Error);     // stream counts differ
  EXPECT_THROW(setup({{1, 2, 3}, {1, 2, 12}, {1, 2, 1}}), Error);  // cont has 3 axes
  try {
    setup({{1, 2, 3}, {1, 2, 9}, {1, 2}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 x 3 gate inputs"), std::string::npos) << e.what();
  }
  Blobs<double> b({{1, 2, 3}, {1, 2, 12}, {1, 2}}, 2);
  LSTMUnitLayer<double> layer(UnitParam());
  layer.SetUp(b.bottom, b.top);
  layer.Forward(b.bottom, b.top);
  EXPECT_THROW(layer.Backward(b.top, {true, true, true}, b.bottom), Error);
  EXPECT_FALSE(layer.AllowForceBackward(2));
}

// ---------------------------------------------------------------- LSTM

TEST(LSTMLayer, HandWorkedForward) {
  // T = 2, N = 1, one input, H = 1. W_xc = [1, -1, 2, 1/2] (i, f, o, g), b_c = [0, 1/2, -1/2, 0],
  // W_hc = [1/2, 1/2, -1, 1]; x = [1, -2], cont = [0, 1].
  // t = 1 (cont 0: h_0 and c_0 dropped): pre = W_xc x_1 + b_c = [1, -1/2, 3/2, 1/2]
  //   i = sigmoid(1) = 0.73105858, f = 0, o = sigmoid(3/2) = 0.81757448, g = tanh(1/2) = 0.46211716
  //   c_1 = i g = 0.33783471, h_1 = o tanh(c_1) = 0.26615560
  // t = 2: pre = W_xc x_2 + b_c + W_hc h_1 = [-2 + h_1/2, 2.5 + h_1/2, -4.5 - h_1, -1 + h_1]
  //   i = 0.13389825, f = 0.93296031, o = 0.00844118, g = -0.62541168
  //   c_2 = f c_1 + i g = 0.23144485, h_2 = o tanh(c_2) = 0.00191952
  auto run = [](auto zero, double tol) {
    using T = decltype(zero);
    Blob<T> x({2, 1, 1}), cont({2, 1}), h;
    Set(&x, {1, -2});
    Set(&cont, {0, 1});
    LSTMLayer<T> layer(RecurrentParam("LSTM", 1));
    layer.SetUp({&x, &cont}, {&h});
    Set(layer.blobs()[0].get(), {1, -1, 2, 0.5});
    Set(layer.blobs()[1].get(), {0, 0.5, -0.5, 0});
    Set(layer.blobs()[2].get(), {0.5, 0.5, -1, 1});
    layer.Forward({&x, &cont}, {&h});
    ASSERT_EQ(h.shape(), (std::vector<int>{2, 1, 1}));
    EXPECT_NEAR(h.cpu_data()[0], 0.2661556042832873, tol);
    EXPECT_NEAR(h.cpu_data()[1], 0.0019195164022526663, tol * 0.01);
  };
  run(0.0, 1e-12);
  run(0.0f, 1e-6);
}

// The LSTM over T steps equals T LSTMUnit steps fed with the gate inputs computed by hand from the parameters
// (with x_static and expose_hidden, so that h_0 and c_0 are arbitrary): h, and h_T, c_T.
TEST(LSTMLayer, EqualsChainedLSTMUnitSteps) {
  const int T = 4, N = 3, I = 2, S = 5, H = 3, G = 4 * H;
  Blobs<double> b({{T, N, I}, {T, N}, {N, S}, {1, N, H}, {1, N, H}}, 3);
  FillCont(b.bottom[1]);
  LSTMLayer<double> lstm(RecurrentParam("LSTM", H, true));
  lstm.SetUp(b.bottom, b.top);
  lstm.Forward(b.bottom, b.top);
  const double* W = lstm.blobs()[0]->cpu_data();
  const double* bias = lstm.blobs()[1]->cpu_data();
  const double* Ws = lstm.blobs()[2]->cpu_data();
  const double* Wh = lstm.blobs()[3]->cpu_data();

  Blob<double> c_prev({1, N, H}), h_prev({1, N, H}), pre({1, N, G}), cont_t({1, N}), c, h;
  c_prev.CopyFrom(*b.bottom[4]);
  h_prev.CopyFrom(*b.bottom[3]);
  LSTMUnitLayer<double> unit(UnitParam());
  unit.SetUp({&c_prev, &pre, &cont_t}, {&c, &h});
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      const double ct = b.bottom[1]->cpu_data()[t * N + n];
      cont_t.mutable_cpu_data()[n] = ct;
      for (int g = 0; g < G; ++g) {
        double v = bias[g];
        for (int i = 0; i < I; ++i) v += W[g * I + i] * b.bottom[0]->cpu_data()[(t * N + n) * I + i];
        for (int s = 0; s < S; ++s) v += Ws[g * S + s] * b.bottom[2]->cpu_data()[n * S + s];
        for (int k = 0; k < H; ++k) v += Wh[g * H + k] * ct * h_prev.cpu_data()[n * H + k];
        pre.mutable_cpu_data()[n * G + g] = v;
      }
    }
    unit.Forward({&c_prev, &pre, &cont_t}, {&c, &h});
    for (int k = 0; k < N * H; ++k) EXPECT_NEAR(b.top[0]->cpu_data()[t * N * H + k], h.cpu_data()[k], 1e-12);
    c_prev.CopyFrom(c);
    h_prev.CopyFrom(h);
  }
  // The exposed final states are the last step's.
  for (int k = 0; k < N * H; ++k) {
    EXPECT_EQ(b.top[1]->cpu_data()[k], b.top[0]->cpu_data()[(T - 1) * N * H + k]);
    EXPECT_NEAR(b.top[2]->cpu_data()[k], c.cpu_data()[k], 1e-12);
  }
}

// ---------------------------------------------------------------- RNN

TEST(RNNLayer, HandWorkedForward) {
  // T = 2, N = 1, one input, H = 1: W_xh = 1, b_h = 0, W_hh = 1/2, W_ho = 2, b_o = -1/2; x = [1/2, -1],
  // cont = [0, 1].
  //   h_1 = tanh(1/2) = 0.46211716,             o_1 = tanh(2 h_1 - 1/2) = 0.40049161
  //   h_2 = tanh(-1 + h_1 / 2) = -0.64631348,   o_2 = tanh(2 h_2 - 1/2) = -0.94603712
  // With expose_hidden the h_T top is h_2 (the hidden state, not the output).
  auto run = [](auto zero, double tol) {
    using T = decltype(zero);
    Blob<T> x({2, 1, 1}), cont({2, 1}), h0({1, 1, 1}), o, hT;
    Set(&x, {0.5, -1});
    Set(&cont, {0, 1});
    Set(&h0, {7});  // dropped by cont_1 = 0
    RNNLayer<T> layer(RecurrentParam("RNN", 1, true));
    layer.SetUp({&x, &cont, &h0}, {&o, &hT});
    Set(layer.blobs()[0].get(), {1});
    Set(layer.blobs()[1].get(), {0});
    Set(layer.blobs()[2].get(), {0.5});
    Set(layer.blobs()[3].get(), {2});
    Set(layer.blobs()[4].get(), {-0.5});
    layer.Forward({&x, &cont, &h0}, {&o, &hT});
    EXPECT_NEAR(o.cpu_data()[0], 0.40049160766626796, tol);
    EXPECT_NEAR(o.cpu_data()[1], -0.9460371200880073, tol);
    EXPECT_NEAR(hT.cpu_data()[0], -0.6463134841204404, tol);
  };
  run(0.0, 1e-12);
  run(0.0f, 1e-6);
}

// ---------------------------------------------------------------- shared behaviour, both layers

class RecurrentTypes : public ::testing::TestWithParam<std::string> {};

// Without expose_hidden, a forward starts from the state the previous one ended in: two forwards over T steps
// equal one over 2T. A sequence start (cont = 0) drops it.
TEST_P(RecurrentTypes, CarriesStateBetweenForwardsAndResetsOnSequenceStart) {
  const std::string type = GetParam();
  const int T = 3, N = 2, I = 3, H = 4;
  Blobs<double> whole({{2 * T, N, I}, {2 * T, N}}, 1);
  cpu_set(2 * T * N, 1.0, whole.bottom[1]->mutable_cpu_data());
  whole.bottom[1]->mutable_cpu_data()[0] = 0;  // stream 0 starts, stream 1 continues the zero state
  auto reference = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H));
  reference->SetUp(whole.bottom, whole.top);
  reference->Forward(whole.bottom, whole.top);

  Blobs<double> half({{T, N, I}, {T, N}}, 1);
  auto layer = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H));
  layer->SetUp(half.bottom, half.top);
  for (size_t i = 0; i < layer->blobs().size(); ++i) layer->blobs()[i]->CopyFrom(*reference->blobs()[i]);
  const int step = N * I, out_step = N * H;
  for (int part = 0; part < 2; ++part) {
    cpu_copy(T * step, whole.bottom[0]->cpu_data() + part * T * step, half.bottom[0]->mutable_cpu_data());
    cpu_copy(T * N, whole.bottom[1]->cpu_data() + part * T * N, half.bottom[1]->mutable_cpu_data());
    layer->Forward(half.bottom, half.top);
    for (int k = 0; k < T * out_step; ++k) {
      EXPECT_NEAR(half.top[0]->cpu_data()[k], whole.top[0]->cpu_data()[part * T * out_step + k], 1e-12)
          << "part " << part << " value " << k;
    }
  }
  // A third forward whose first step starts both sequences forgets the carried state: it equals a fresh layer's.
  cpu_copy(T * step, whole.bottom[0]->cpu_data(), half.bottom[0]->mutable_cpu_data());
  cpu_copy(T * N, whole.bottom[1]->cpu_data(), half.bottom[1]->mutable_cpu_data());
  half.bottom[1]->mutable_cpu_data()[0] = half.bottom[1]->mutable_cpu_data()[1] = 0;
  layer->Forward(half.bottom, half.top);
  const std::vector<double> restarted = Values(*half.top[0]);
  static_cast<RecurrentLayer<double>*>(layer.get())->Reset();
  half.bottom[1]->mutable_cpu_data()[0] = half.bottom[1]->mutable_cpu_data()[1] = 1;  // continue the zero state
  layer->Forward(half.bottom, half.top);
  for (int k = 0; k < T * out_step; ++k) EXPECT_NEAR(half.top[0]->cpu_data()[k], restarted[k], 1e-12) << k;
}

// A re-run of a forward (the recompute executor's, through ReplayForward, after the saved activations were
// released) starts from the same state, leaves the carried state where the forward left it, and gives the
// same gradients.
TEST_P(RecurrentTypes, ReplayedForwardKeepsTheState) {
  const std::string type = GetParam();
  const int T = 3, N = 2, I = 3, H = 2;
  Blobs<double> b({{T, N, I}, {T, N}}, 1);
  cpu_set(T * N, 1.0, b.bottom[1]->mutable_cpu_data());
  std::shared_ptr<Layer<double>> layer = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H));
  layer->SetUp(b.bottom, b.top);
  EXPECT_TRUE(layer->IsStochastic());
  EXPECT_EQ(layer->SavedActivations().size(), 2u);
  std::vector<double> dy(T * N * H);
  for (size_t k = 0; k < dy.size(); ++k) dy[k] = std::sin(1.0 + k);
  auto backward = [&]() {
    for (auto& p : layer->blobs()) p->clear_diff();
    cpu_copy(T * N * H, dy.data(), b.top[0]->mutable_cpu_diff());
    layer->Backward(b.top, {true, false}, b.bottom);
    std::vector<double> g(b.bottom[0]->cpu_diff(), b.bottom[0]->cpu_diff() + b.bottom[0]->count());
    for (auto& p : layer->blobs()) g.insert(g.end(), p->cpu_diff(), p->cpu_diff() + p->count());
    return g;
  };
  layer->Forward(b.bottom, b.top);  // a first iteration: the state is no longer zero
  const std::mt19937 engine = Strata::rng();
  layer->Forward(b.bottom, b.top);
  const std::vector<double> out = Values(*b.top[0]);
  const std::vector<double> grads = backward();
  // That forward re-run as the recompute executor does it (its saved activations released first): same output,
  // same gradients.
  layer->ReleaseActivations();
  ReplayForward<double>({layer}, engine, [&] { layer->Forward(b.bottom, b.top); });
  EXPECT_EQ(Values(*b.top[0]), out);
  EXPECT_EQ(backward(), grads);
  // The next real forward continues from the state the iteration ended in, as it would have without the re-run.
  layer->Forward(b.bottom, b.top);
  const std::vector<double> third = Values(*b.top[0]);
  auto fresh = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H));
  fresh->SetUp(b.bottom, b.top);
  for (size_t i = 0; i < layer->blobs().size(); ++i) fresh->blobs()[i]->CopyFrom(*layer->blobs()[i]);
  for (int k = 0; k < 3; ++k) fresh->Forward(b.bottom, b.top);
  EXPECT_EQ(Values(*b.top[0]), third);
}

// Finite differences for every bottom but cont and every parameter, with and without x_static and
// expose_hidden, with sequence starts inside the batch.
TEST_P(RecurrentTypes, GradientCheck) {
  const std::string type = GetParam();
  const int states = type == "LSTM" ? 2 : 1;
  const int T = 3, N = 2, H = 2;
  for (bool with_static : {false, true}) {
    for (bool expose : {false, true}) {
      SCOPED_TRACE(type + (with_static ? " x_static" : "") + (expose ? " expose_hidden" : ""));
      std::vector<std::vector<int>> shapes = {{T, N, 3, 1}, {T, N}};
      if (with_static) shapes.push_back({N, 2});
      if (expose) shapes.insert(shapes.end(), states, {1, N, H});
      Blobs<double> b(shapes, 1 + (expose ? states : 0));
      FillCont(b.bottom[1]);
      auto layer = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H, expose));
      GradientChecker<double> checker(1e-4, 1e-6);
      checker.CheckGradient(layer.get(), b.bottom, b.top, 0);  // x and the parameters
      EXPECT_EQ(
          checker.last_num_checked(), b.bottom[0]->count() + [&] {
            int n = 0;
            for (auto& p : layer->blobs()) n += p->count();
            return n;
          }());
      for (int i = 2; i < static_cast<int>(b.bottom.size()); ++i) {
        checker.CheckBottomGradients(layer.get(), b.bottom, b.top, i);
      }
    }
  }
}

// Caffe's parameter blobs, in its order and shapes; weight_filler fills the weights, bias_filler the biases.
TEST_P(RecurrentTypes, ParametersInCaffeOrder) {
  const std::string type = GetParam();
  const int T = 2, N = 3, I = 6, S = 5, H = 2;
  const int G = type == "LSTM" ? 4 * H : H;
  for (bool with_static : {false, true}) {
    std::vector<std::vector<int>> shapes = {{T, N, 2, 3}, {T, N}};
    if (with_static) shapes.push_back({N, 5, 1});
    Blobs<double> b(shapes, 1);
    auto layer = LayerRegistry<double>::CreateLayer(RecurrentParam(type, H, false,
                                                                   "weight_filler { type: 'constant' value: 2 } "
                                                                   "bias_filler { type: 'constant' value: 3 }"));
    layer->SetUp(b.bottom, b.top);
    std::vector<std::vector<int>> want = {{G, I}, {G}};  // W_x, b
    if (with_static) want.push_back({G, S});             // W_x_static
    want.push_back({G, H});                              // W_h
    if (type == "RNN") {
      want.push_back({H, H});  // W_ho
      want.push_back({H});     // b_o
    }
    ASSERT_EQ(layer->blobs().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(layer->blobs()[i]->shape(), want[i]) << i;
      const double filled = want[i].size() == 1 ? 3 : 2;
      EXPECT_EQ(layer->blobs()[i]->cpu_data()[0], filled) << i;
    }
    EXPECT_EQ(b.top[0]->shape(), (std::vector<int>{T, N, H}));
    // Parameters that come with the layer (a caffemodel) are kept; the wrong number is refused.
    LayerParameter with_blobs = layer->layer_param();
    for (auto& p : layer->blobs()) p->ToProto(with_blobs.add_blobs());
    auto loaded = LayerRegistry<double>::CreateLayer(with_blobs);
    EXPECT_NO_THROW(loaded->SetUp(b.bottom, b.top));
    with_blobs.mutable_blobs()->RemoveLast();
    auto short_of_one = LayerRegistry<double>::CreateLayer(with_blobs);
    EXPECT_THROW(short_of_one->SetUp(b.bottom, b.top), Error);
  }
}

TEST_P(RecurrentTypes, RefusesBadConfigurations) {
  const std::string type = GetParam();
  const int states = type == "LSTM" ? 2 : 1;
  auto setup = [&](const LayerParameter& p, const std::vector<std::vector<int>>& shapes, int tops) {
    Blobs<double> b(shapes, tops);
    auto layer = LayerRegistry<double>::CreateLayer(p);
    layer->SetUp(b.bottom, b.top);
  };
  auto expect_message = [&](const LayerParameter& p, const std::vector<std::vector<int>>& shapes, int tops,
                            const std::string& text) {
    try {
      setup(p, shapes, tops);
      ADD_FAILURE() << "no error; expected one saying '" << text << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  const LayerParameter plain = RecurrentParam(type, 3);
  const LayerParameter exposed = RecurrentParam(type, 3, true);
  EXPECT_NO_THROW(setup(plain, {{2, 4, 5}, {2, 4}}, 1));
  EXPECT_NO_THROW(setup(plain, {{2, 4, 5}, {2, 4}, {4, 2}}, 1));
  expect_message(RecurrentParam(type, 0), {{2, 4, 5}, {2, 4}}, 1, "num_output must be positive");
  expect_message(plain, {{2, 4, 5}, {2, 3}}, 1, "does not match");            // cont's streams
  expect_message(plain, {{2, 4, 5}, {3, 4}}, 1, "does not match");            // cont's steps
  expect_message(plain, {{2, 4, 5}, {2, 4, 1}}, 1, "exactly 2 axes");         // cont's axes
  expect_message(plain, {{2}, {2, 1}}, 1, "at least 2 axes");                 // x's axes
  expect_message(plain, {{2, 4, 5}, {2, 4}, {3, 2}}, 1, "x_static");          // x_static's streams
  EXPECT_THROW(setup(plain, {{2, 4, 5}}, 1), Error);                          // one bottom
  EXPECT_THROW(setup(plain, {{2, 4, 5}, {2, 4}, {4, 2}, {4, 2}}, 1), Error);  // one too many
  EXPECT_THROW(setup(plain, {{2, 4, 5}, {2, 4}}, 2), Error);                  // h_T without expose_hidden
  EXPECT_THROW(setup(exposed, {{2, 4, 5}, {2, 4}}, 1 + states), Error);       // the initial states missing
  std::vector<std::vector<int>> with_states = {{2, 4, 5}, {2, 4}};
  with_states.insert(with_states.end(), states, {1, 4, 3});
  EXPECT_NO_THROW(setup(exposed, with_states, 1 + states));
  EXPECT_THROW(setup(exposed, with_states, 1), Error);  // the final-state tops missing
  with_states.back() = {1, 4, 2};
  expect_message(exposed, with_states, 1 + states, "shape mismatch");

  // The number of time steps is fixed at setup; no gradient to cont.
  Blobs<double> b({{2, 4, 5}, {2, 4}}, 1);
  auto layer = LayerRegistry<double>::CreateLayer(plain);
  layer->SetUp(b.bottom, b.top);
  EXPECT_FALSE(layer->AllowForceBackward(1));
  EXPECT_TRUE(layer->AllowForceBackward(0));
  layer->Forward(b.bottom, b.top);
  try {
    layer->Backward(b.top, {true, true}, b.bottom);
    ADD_FAILURE() << "backward to cont accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence indicators"), std::string::npos) << e.what();
  }
  b.bottom[0]->Reshape({3, 4, 5});
  b.bottom[1]->Reshape({3, 4});
  EXPECT_THROW(layer->Forward(b.bottom, b.top), Error);
  // The number of streams may change: the carried state starts again from zero.
  b.bottom[0]->Reshape({2, 6, 5});
  b.bottom[1]->Reshape({2, 6});
  EXPECT_NO_THROW(layer->Forward(b.bottom, b.top));
  EXPECT_EQ(b.top[0]->shape(), (std::vector<int>{2, 6, 3}));
}

INSTANTIATE_TEST_SUITE_P(RecurrentLayers, RecurrentTypes, ::testing::Values("LSTM", "RNN"));

// The registered names, and an LSTM in a net built from prototxt, fed by Input layers.
TEST(RecurrentLayers, BuildFromPrototxt) {
  for (const char* type : {"RNN", "LSTM", "LSTMUnit"}) {
    EXPECT_TRUE(LayerRegistry<float>::Has(type)) << type;
    EXPECT_TRUE(LayerRegistry<double>::Has(type)) << type;
  }
  NetParameter param;
  ReadProtoFromTextString(R"(
    name: "lstm_net"
    layer { name: "data" type: "Input" top: "x" top: "cont" top: "x_static"
            input_param { shape { dim: 4 dim: 2 dim: 3 } shape { dim: 4 dim: 2 } shape { dim: 2 dim: 5 } } }
    layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" bottom: "x_static" top: "h"
            recurrent_param { num_output: 6 weight_filler { type: "uniform" min: -0.1 max: 0.1 }
                              bias_filler { type: "constant" value: 0 } } }
    layer { name: "rnn" type: "RNN" bottom: "h" bottom: "cont" top: "o" recurrent_param { num_output: 2 } }
  )",
                          &param);
  Net<float> net(param);
  EXPECT_EQ(net.blob_by_name("h")->shape(), (std::vector<int>{4, 2, 6}));
  EXPECT_EQ(net.blob_by_name("o")->shape(), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(net.params().size(), 4u + 5u);
  cpu_set(8, 1.f, net.blob_by_name("cont")->mutable_cpu_data());
  net.Forward();
  for (int k = 0; k < 16; ++k) EXPECT_TRUE(std::isfinite(net.blob_by_name("o")->cpu_data()[k]));
}

// Through the recompute executor with every node its own segment, so that backward re-runs the recurrent
// layers: three iterations carrying the state from one to the next give bit-identical losses and gradients.
TEST(RecurrentLayers, RecomputationLeavesTrainingUnchanged) {
  const char* kNet = R"(
    name: "recurrent_exec"
    layer { name: "data" type: "Input" top: "x" top: "cont" top: "y"
            input_param { shape { dim: 4 dim: 2 dim: 3 } shape { dim: 4 dim: 2 } shape { dim: 4 dim: 2 } } }
    layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h"
            recurrent_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "rnn" type: "RNN" bottom: "h" bottom: "cont" top: "o"
            recurrent_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "fc" type: "InnerProduct" bottom: "o" top: "f"
            inner_product_param { num_output: 3 axis: 2 weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "f" bottom: "y" top: "l" softmax_param { axis: 2 } }
  )";
  auto run = [&](bool recompute) {
    NetParameter param;
    ReadProtoFromTextString(kNet, &param);
    param.mutable_state()->set_phase(TRAIN);
    Strata::set_random_seed(77);
    Net<float> net(param);
    if (recompute) {
      const RecomputeGraph g = ExtractGraph(net);
      const RecomputePlan plan = SqrtPlan(g, g.size());
      EXPECT_GT(plan.recompute_flops, 0);
      InstallRecomputePlan(&net, plan);
    }
    std::vector<float> values;
    for (int it = 0; it < 3; ++it) {
      Blob<float>* x = net.blob_by_name("x").get();
      rng_uniform<float>(x->count(), -1.f, 1.f, x->mutable_cpu_data());
      float* cont = net.blob_by_name("cont")->mutable_cpu_data();
      for (int k = 0; k < 8; ++k) cont[k] = (it == 0 && k == 0) ? 0.f : 1.f;
      float* y = net.blob_by_name("y")->mutable_cpu_data();
      for (int k = 0; k < 8; ++k) y[k] = static_cast<float>((k + it) % 3);
      net.ClearParamDiffs();
      values.push_back(net.ForwardBackward());
      for (const auto& p : net.params()) values.insert(values.end(), p->cpu_diff(), p->cpu_diff() + p->count());
      for (Blob<float>* p : net.learnable_params()) cpu_axpy(p->count(), -0.1f, p->cpu_diff(), p->mutable_cpu_data());
    }
    return values;
  };
  const std::vector<float> plain = run(false);
  const std::vector<float> recomputed = run(true);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t k = 0; k < plain.size(); ++k) ASSERT_EQ(plain[k], recomputed[k]) << k;
}

}  // namespace
}  // namespace strata
