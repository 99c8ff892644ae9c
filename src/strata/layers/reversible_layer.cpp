#include "strata/layers/reversible_layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

#include "coupling_math.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
typename ReversibleLayer<Dtype>::Step ReversibleLayer<Dtype>::BuildStep(
    const google::protobuf::RepeatedPtrField<LayerParameter>& layers, const std::string& which,
    const std::vector<int>& window_shape, const std::vector<int>& state_shape) {
  const std::string where = this->describe() + ", sub-network " + which;
  STRATA_REQUIRE(!layers.empty()) << where << " has no layers";
  // The step's input: the one blob name its layers read but none of them writes.
  std::set<std::string> produced, inputs;
  for (const LayerParameter& l : layers) {
    for (const std::string& b : l.bottom()) {
      if (!produced.count(b)) inputs.insert(b);
    }
    for (const std::string& t : l.top()) produced.insert(t);
  }
  STRATA_REQUIRE(inputs.size() == 1) << where << " must read exactly one blob it does not produce (its input), "
                                     << "found " << inputs.size();
  NetParameter param;
  std::string name = which;
  name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
  param.set_name(this->layer_param_.name() + "/" + name);
  param.set_force_backward(true);  // no loss inside: every layer back-propagates what the block hands it
  param.mutable_state()->set_phase(this->phase_);
  // The block's precision (its own, or its net's: Net::Init) reaches its inner layers that set none, as a net's does.
  if (this->layer_param_.has_precision()) param.set_precision(this->layer_param_.precision());
  LayerParameter* input = param.add_layer();
  input->set_name(param.name() + "/input");
  input->set_type("Input");
  input->add_top(*inputs.begin());
  BlobShape* shape = input->mutable_input_param()->add_shape();
  for (int d : window_shape) shape->add_dim(d);
  for (const LayerParameter& l : layers) *param.add_layer() = l;

  Step s;
  try {
    s.net = std::make_unique<Net<Dtype>>(param);
  } catch (const Error& e) {
    STRATA_FAIL() << where << ": " << e.what();
  }
  STRATA_REQUIRE(s.net->output_blobs().size() == 1)
      << where << " must have exactly one output (a top no layer of it reads), found "
      << s.net->output_blobs().size();
  s.input = s.net->input_blobs()[0];
  s.output = s.net->output_blobs()[0];
  STRATA_REQUIRE(s.output->shape() == state_shape)
      << where << " maps its input of shape " << s.input->shape_string() << " to an output of shape "
      << s.output->shape_string() << "; an additive coupling needs an output of the same shape as one state, "
      << Blob<Dtype>(state_shape).shape_string();
  return s;
}

namespace {

// The shape of `count` of the m states of `x` (the channel axis divided by m, times count).
std::vector<int> StatesShape(const std::vector<int>& x, int m, int count) {
  std::vector<int> shape = x;
  shape[1] = shape[1] / m * count;
  return shape;
}

}  // namespace

template <typename Dtype>
void ReversibleLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ReversibleParameter& p = this->layer_param_.reversible_param();
  verify_ = p.verify();
  STRATA_REQUIRE(p.streams() >= 2) << this->describe() << ": reversible_param.streams is " << p.streams()
                                   << "; a coupling needs at least 2 streams";
  STRATA_REQUIRE(p.gamma() != 0 && std::isfinite(p.gamma()))
      << this->describe() << ": reversible_param.gamma is " << p.gamma()
      << "; the inverse x_{t-m} = (x_t - F_t) / gamma needs a finite gamma other than 0";
  STRATA_REQUIRE(p.step_size() == 0 || (p.f_size() == 0 && p.g_size() == 0))
      << this->describe() << ": reversible_param gives both f/g and step; write the steps one way";
  {
    // Rebuilding divides by gamma once per step of a stream's chain (ceil(k / m) steps), multiplying the rounding
    // error by 1 / |gamma| each time (docs/reversible.md, "Exactness"): refuse a gamma that leaves the rebuilt
    // input fewer than half of Dtype's significant bits (12 of float's 24), before training on noise.
    const int k = p.step_size() > 0 ? p.step_size() : 2;
    const int chain = (k + static_cast<int>(p.streams()) - 1) / static_cast<int>(p.streams());
    const double amplification = std::pow(std::fabs(p.gamma()), -chain);
    const double most = std::ldexp(1.0, std::numeric_limits<Dtype>::digits / 2);
    STRATA_REQUIRE(amplification <= most)
        << this->describe() << ": reversible_param.gamma is " << p.gamma() << ": rebuilding the input divides by "
        << "it " << chain << " time(s), amplifying rounding errors by " << amplification << " > 2^"
        << std::numeric_limits<Dtype>::digits / 2 << ", which leaves less than half the precision; use |gamma| >= "
        << std::pow(most, -1.0 / chain);
  }
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() >= 2) << this->describe() << ": the input of shape " << x.shape_string()
                                    << " has no channel axis to split";
  STRATA_REQUIRE(static_cast<uint32_t>(x.shape(1)) % p.streams() == 0)
      << this->describe() << ": the input of shape " << x.shape_string() << " has " << x.shape(1)
      << " channels, which cannot be split into " << p.streams() << " equal states";
  streams_ = static_cast<int>(p.streams());  // at most the channel count
  gamma_ = static_cast<Dtype>(p.gamma());
  const std::vector<int> window_shape = StatesShape(x.shape(), streams_, streams_ - 1);
  const std::vector<int> state_shape = StatesShape(x.shape(), streams_, 1);
  steps_.clear();
  if (p.step_size() > 0) {
    for (int t = 0; t < p.step_size(); ++t) {
      steps_.push_back(BuildStep(p.step(t).layer(), "step " + std::to_string(t + 1), window_shape, state_shape));
    }
  } else {
    steps_.push_back(BuildStep(p.f(), "f", window_shape, state_shape));
    steps_.push_back(BuildStep(p.g(), "g", window_shape, state_shape));
  }

  // The first step's parameters, then the next's (F's, then G's), become this layer's, with the lr/decay
  // multipliers and names their own layers give them.
  STRATA_REQUIRE(this->blobs_.empty() || this->layer_param_.blobs_size() == 0)
      << this->describe() << ": weights are given by the sub-networks' parameters";
  this->blobs_.clear();
  this->layer_param_.clear_param();
  statistic_.clear();
  for (const Step& step : steps_) {
    const Net<Dtype>& net = *step.net;
    for (int l = 0; l < net.num_layers(); ++l) {
      const auto& layer = net.layers()[l];
      for (size_t i = 0; i < layer->blobs().size(); ++i) {
        const auto& blob = layer->blobs()[i];
        if (std::find(this->blobs_.begin(), this->blobs_.end(), blob) != this->blobs_.end()) continue;
        this->blobs_.push_back(blob);
        const LayerParameter& lp = layer->layer_param();
        *this->layer_param_.add_param() = static_cast<int>(i) < lp.param_size() ? lp.param(i) : ParamSpec();
        statistic_.push_back(layer->ParamIsStatistic(static_cast<int>(i)));
      }
    }
  }
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(top[0] != bottom[0]) << this->describe()
                                      << " cannot run in place: backward rebuilds its input beside its output";
  STRATA_REQUIRE(x.num_axes() >= 2 && x.shape(1) % streams_ == 0)
      << this->describe() << ": the input of shape " << x.shape_string() << " cannot be split into " << streams_
      << " states";
  const std::vector<int> window_shape = StatesShape(x.shape(), streams_, streams_ - 1);
  const std::vector<int> state_shape = StatesShape(x.shape(), streams_, 1);
  for (Step& s : steps_) {
    if (s.input->shape() != window_shape) {
      s.input->Reshape(window_shape);
      s.net->Reshape();
      STRATA_REQUIRE(s.output->shape() == state_shape)
          << this->describe() << ": a sub-network maps " << s.input->shape_string() << " to "
          << s.output->shape_string();
    }
  }
  outer_ = x.shape(0);
  state_ = x.count(1) / streams_;
  between_.Reshape(StatesShape(x.shape(), streams_, std::max(0, num_steps() - streams_)));
  top[0]->ReshapeLike(x);
}

template <typename Dtype>
bool ReversibleLayer<Dtype>::IsStochastic() const {
  for (const Step& s : steps_) {
    for (const auto& l : s.net->layers()) {
      if (l->IsStochastic()) return true;
    }
  }
  return false;
}

template <typename Dtype>
void ReversibleLayer<Dtype>::set_replaying(bool replaying) {
  for (Step& s : steps_) {
    for (const auto& l : s.net->layers()) l->set_replaying(replaying);
  }
}

template <typename Dtype>
template <typename P>
Rows<P> ReversibleLayer<Dtype>::State(const States<P>& s, int i) const {
  const int m = streams_, k = num_steps();
  if (i < m) return {s.in + i * state_, m * state_};
  if (i < k) return {s.between + (i - m) * state_, (k - m) * state_};
  return Output(s.out, i);
}

template <typename Dtype>
template <typename P>
Rows<P> ReversibleLayer<Dtype>::Output(P out, int i) const {
  return {out + (i - num_steps()) * state_, streams_ * state_};
}

template <typename Dtype>
template <typename M>
void ReversibleLayer<Dtype>::RunForward(int t, const States<const Dtype*>& states, bool replay) {
  Step& s = steps_[t];
  // The window x_{t+1} .. x_{t+m-1}, concatenated along channels image after image.
  Dtype* window = M::mutable_data(*s.input);
  const int width = streams_ - 1;
  for (int w = 0; w < width; ++w) {
    M::copy(outer_, state_, State(states, t + 1 + w), Rows<Dtype*>{window + w * state_, width * state_});
  }
  if (replay) {
    // The recomputation must see the forward's random numbers and must not move running statistics again.
    ReplayForward(s.net->layers(), s.rng_at_forward, [&] { s.net->Forward(); });
  } else {
    s.rng_at_forward = Strata::rng();
    s.net->Forward();
  }
}

template <typename Dtype>
void ReversibleLayer<Dtype>::DropActivations(Step& s) {
  for (const auto& blob : s.net->blobs()) blob->release_memory();
  for (const auto& layer : s.net->layers()) layer->ReleaseActivations();
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<CpuCoupling<Dtype>>(bottom, top);
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  BackwardWith<CpuCoupling<Dtype>>(top, propagate_down, bottom);
}

#ifdef STRATA_USE_CUDA
// The same passes with the coupling's kernels (coupling_math.cu); the steps' nets run their layers' GPU code.
template <typename Dtype>
void ReversibleLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<GpuCoupling<Dtype>>(bottom, top);
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  BackwardWith<GpuCoupling<Dtype>>(top, propagate_down, bottom);
}
#endif

template <typename Dtype>
template <typename M>
void ReversibleLayer<Dtype>::ForwardWith(const BlobVec& bottom, const BlobVec& top) {
  const int m = streams_, k = num_steps();
  const Dtype* x = M::data(*bottom[0]);
  Dtype* y = M::mutable_data(*top[0]);
  const States<Dtype*> states{nullptr, k > m ? M::mutable_data(between_) : nullptr, y};
  const States<const Dtype*> read{x, states.between, y};
  // With fewer steps than streams the newest input states are output states too.
  for (int i = k; i < m; ++i) M::copy(outer_, state_, State(read, i), Output(y, i));
  // x_{t+m} = F_t(x_{t+1}, ..., x_{t+m-1}) + gamma x_t; RevNet's y1 = F(x2) + x1, y2 = G(y1) + x2.
  for (int t = 0; t < k; ++t) {
    RunForward<M>(t, read, false);
    M::couple(outer_, state_, gamma_, {M::data(*steps_[t].output), state_}, State(read, t), State(states, t + m));
    DropActivations(steps_[t]);
  }
  if (verify_) {
    kept_input_.CopyFrom(*bottom[0], false, true);
  } else {
    between_.release_memory();  // rebuilt in backward
  }
}

template <typename Dtype>
template <typename M>
void ReversibleLayer<Dtype>::BackwardWith(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  const int m = streams_, k = num_steps(), window = m - 1;
  const Dtype* y = M::data(*top[0]);
  const Dtype* dy = M::diff(*top[0]);
  // The input is rebuilt into the bottom when the Net dropped it; the states between input and output are always
  // rebuilt. In verify mode both are rebuilt beside the kept values, and the steps read the kept ones (which is
  // what back-propagating "from kept values" means).
  const bool rebuild = verify_ || !bottom[0]->has_data();
  States<Dtype*> rebuilt{nullptr, nullptr, nullptr};  // where the input's states and those between are rebuilt
  States<const Dtype*> read{nullptr, nullptr, y};     // where the steps read them
  if (verify_) {
    rebuilt_input_.ReshapeLike(*bottom[0]);
    rebuilt.in = M::mutable_data(rebuilt_input_);
    read.in = M::data(kept_input_);
    if (k > m) {
      rebuilt_between_.ReshapeLike(between_);
      rebuilt.between = M::mutable_data(rebuilt_between_);
      read.between = M::data(between_);
    }
  } else {
    rebuilt.in = M::mutable_data(*bottom[0]);
    if (k > m) rebuilt.between = M::mutable_data(between_);
    read.in = rebuilt.in;
    read.between = rebuilt.between;
  }
  const States<Dtype*> grad{propagate_down[0] ? M::mutable_diff(*bottom[0]) : nullptr,
                            k > m ? M::mutable_diff(between_) : nullptr, nullptr};

  // Input states that are output states too (fewer steps than streams): the output holds them, and their
  // gradient starts with the output's.
  for (int i = k; i < m; ++i) {
    if (rebuild) M::copy(outer_, state_, Output(y, i), State(rebuilt, i));
    if (grad.in) M::copy(outer_, state_, Output(dy, i), State(grad, i));
  }
  // The steps backwards: step t rebuilds x_t from x_{t+m} and its window, whose states are all later than x_t
  // and so already known.
  for (int t = k - 1; t >= 0; --t) {
    Step& s = steps_[t];
    RunForward<M>(t, read, true);
    // x_t = (x_{t+m} - F_t(...)) / gamma; RevNet's x2 = y2 - G(y1), then x1 = y1 - F(x2).
    if (rebuild || t >= m) {
      M::uncouple(outer_, state_, gamma_, State(read, t + m), {M::data(*s.output), state_}, State(rebuilt, t));
    }
    // x_{t+m}'s gradient is F_t's output gradient. For an output state: the output's gradient plus what the later
    // steps that read x_{t+m} sent back (RevNet's dy1 + G'(y1)^T dy2); for a state between, gathered already.
    const Rows<Dtype*> fd{M::mutable_diff(*s.output), state_};
    if (t + m < k) {
      M::copy(outer_, state_, ReadOnly(State(grad, t + m)), fd);
    } else {
      M::copy(outer_, state_, Output(dy, t + m), fd);
      for (int u = t + 1; u < std::min(t + m, k); ++u) {
        M::add(outer_, state_, {M::diff(*steps_[u].input) + (t + m - u - 1) * state_, window * state_}, fd);
      }
    }
    // x_t's gradient starts as gamma times that (before F_t's backward, which may overwrite its output gradient in
    // place); the earlier steps that read x_t add theirs.
    if (grad.in || t >= m) M::scale(outer_, state_, gamma_, ReadOnly(fd), State(grad, t));
    s.net->Backward();
    // What F_t sends back to its window: added at once to input states and states between; output states
    // collect theirs when their own step comes (above).
    const Dtype* sent = M::diff(*s.input);
    for (int w = 0; w < window; ++w) {
      const int i = t + 1 + w;
      if (i >= std::max(m, k) || (i < m && !grad.in)) continue;
      M::add(outer_, state_, {sent + w * state_, window * state_}, State(grad, i));
    }
    if (t + m - 1 < k) DropActivations(steps_[t + m - 1]);  // this step was the last to read what it sent
  }
  for (int t = 0; t < std::min(k, m - 1); ++t) DropActivations(steps_[t]);

  if (verify_) {
    // Measured on the host: verify mode is for checking, not for speed.
    Dtype worst = 0;
    auto compare = [&worst](const Blob<Dtype>& kept, const Blob<Dtype>& again) {
      const Dtype *a = kept.cpu_data(), *b = again.cpu_data();
      for (int i = 0; i < kept.count(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    };
    compare(kept_input_, rebuilt_input_);
    if (k > m) compare(between_, rebuilt_between_);
    rebuilt_input_.release_memory();
    rebuilt_between_.release_memory();
    reconstruction_error_ = worst;
    LOG(INFO) << this->describe() << ": largest reconstruction error " << worst;
  } else {
    between_.release_memory();
  }
}

STRATA_INSTANTIATE_CLASS(ReversibleLayer);
REGISTER_LAYER_CLASS(Reversible);

}  // namespace strata
