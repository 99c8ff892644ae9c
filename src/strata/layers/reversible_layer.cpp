#include "strata/layers/reversible_layer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
typename ReversibleLayer<Dtype>::Branch ReversibleLayer<Dtype>::BuildBranch(
    const google::protobuf::RepeatedPtrField<LayerParameter>& layers, const char* which,
    const std::vector<int>& half_shape) {
  const std::string where = this->describe() + ", sub-network " + which;
  STRATA_REQUIRE(!layers.empty()) << where << ": reversible_param." << which << " has no layers";
  // The branch's input: the one blob name its layers read but none of them writes.
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
  param.set_name(this->layer_param_.name() + "/" + which);
  param.set_force_backward(true);  // no loss inside: every layer back-propagates what the block hands it
  param.mutable_state()->set_phase(this->phase_);
  LayerParameter* input = param.add_layer();
  input->set_name(param.name() + "/input");
  input->set_type("Input");
  input->add_top(*inputs.begin());
  BlobShape* shape = input->mutable_input_param()->add_shape();
  for (int d : half_shape) shape->add_dim(d);
  for (const LayerParameter& l : layers) *param.add_layer() = l;

  Branch b;
  try {
    b.net = std::make_unique<Net<Dtype>>(param);
  } catch (const Error& e) {
    STRATA_FAIL() << where << ": " << e.what();
  }
  STRATA_REQUIRE(b.net->output_blobs().size() == 1)
      << where << " must have exactly one output (a top no layer of it reads), found "
      << b.net->output_blobs().size();
  b.input = b.net->input_blobs()[0];
  b.output = b.net->output_blobs()[0];
  STRATA_REQUIRE(b.output->shape() == half_shape)
      << where << " maps its input of shape " << b.input->shape_string() << " to an output of shape "
      << b.output->shape_string() << "; an additive coupling needs the same shape";
  return b;
}

template <typename Dtype>
void ReversibleLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ReversibleParameter& p = this->layer_param_.reversible_param();
  verify_ = p.verify();
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() >= 2) << this->describe() << ": the input of shape " << x.shape_string()
                                    << " has no channel axis to split";
  STRATA_REQUIRE(x.shape(1) % 2 == 0) << this->describe() << ": the input of shape " << x.shape_string() << " has "
                                      << x.shape(1) << " channels, which cannot be split into two equal halves";
  std::vector<int> half_shape = x.shape();
  half_shape[1] /= 2;
  f_ = BuildBranch(p.f(), "f", half_shape);
  g_ = BuildBranch(p.g(), "g", half_shape);

  // F's parameters, then G's, become this layer's, with the lr/decay multipliers and names their own layers
  // give them.
  STRATA_REQUIRE(this->blobs_.empty() || this->layer_param_.blobs_size() == 0)
      << this->describe() << ": weights are given by the sub-networks' parameters";
  this->blobs_.clear();
  this->layer_param_.clear_param();
  statistic_.clear();
  for (Branch* br : {&f_, &g_}) {
    const Net<Dtype>& net = *br->net;
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
  STRATA_REQUIRE(x.num_axes() >= 2 && x.shape(1) % 2 == 0)
      << this->describe() << ": the input of shape " << x.shape_string() << " cannot be split into two halves";
  std::vector<int> half_shape = x.shape();
  half_shape[1] /= 2;
  for (Branch* b : {&f_, &g_}) {
    if (b->input->shape() != half_shape) {
      b->input->Reshape(half_shape);
      b->net->Reshape();
      STRATA_REQUIRE(b->output->shape() == half_shape)
          << this->describe() << ": a sub-network maps " << b->input->shape_string() << " to "
          << b->output->shape_string();
    }
  }
  outer_ = x.shape(0);
  half_ = x.count(1) / 2;
  top[0]->ReshapeLike(x);
}

template <typename Dtype>
bool ReversibleLayer<Dtype>::IsStochastic() const {
  for (const Branch* b : {&f_, &g_}) {
    for (const auto& l : b->net->layers()) {
      if (l->IsStochastic()) return true;
    }
  }
  return false;
}

template <typename Dtype>
void ReversibleLayer<Dtype>::set_replaying(bool replaying) {
  for (Branch* b : {&f_, &g_}) {
    for (const auto& l : b->net->layers()) l->set_replaying(replaying);
  }
}

namespace {

// Half h (0 or 1) of image n: the first or second run of `half` values in the image's 2 x half values.
template <typename Dtype>
Dtype* half_of(Dtype* base, int n, int h, long half) {
  return base + (2L * n + h) * half;
}

// For every image n: out half `h` = a half `h` + sign * branch (the branch's values packed image after image).
// The four coupling steps are all this: y1 = x1 + F, y2 = x2 + G, x2 = y2 - G, x1 = y1 - F.
template <typename Dtype>
void couple(int images, long half, int h, const Dtype* a, Dtype sign, const Dtype* branch, Dtype* out) {
  for (int n = 0; n < images; ++n) {
    const Dtype* an = half_of(a, n, h, half);
    const Dtype* bn = branch + n * half;
    Dtype* on = half_of(out, n, h, half);
    for (long i = 0; i < half; ++i) on[i] = an[i] + sign * bn[i];
  }
}

}  // namespace

template <typename Dtype>
void ReversibleLayer<Dtype>::RunForward(Branch& b, const Dtype* in, bool replay) {
  Dtype* dst = b.input->mutable_cpu_data();
  // `in` points at the wanted half of image 0; images are 2 * half_ apart.
  for (int n = 0; n < outer_; ++n) std::copy_n(in + 2L * n * half_, half_, dst + n * half_);
  if (replay) {
    // The recomputation must see the forward's random numbers and must not move running statistics again.
    ReplayForward(b.net->layers(), b.rng_at_forward, [&] { b.net->Forward(); });
  } else {
    b.rng_at_forward = Strata::rng();
    b.net->Forward();
  }
}

template <typename Dtype>
void ReversibleLayer<Dtype>::DropActivations(Branch& b) {
  for (const auto& blob : b.net->blobs()) blob->release_memory();
  for (const auto& layer : b.net->layers()) layer->ReleaseActivations();
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  // y1 = x1 + F(x2).
  RunForward(f_, x + half_, false);
  couple(outer_, half_, 0, x, Dtype(1), f_.output->cpu_data(), y);
  // y2 = x2 + G(y1).
  RunForward(g_, y, false);
  couple(outer_, half_, 1, x, Dtype(1), g_.output->cpu_data(), y);
  if (verify_) kept_input_.CopyFrom(*bottom[0], false, true);
  DropActivations(f_);
  DropActivations(g_);
}

template <typename Dtype>
void ReversibleLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                          const BlobVec& bottom) {
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  // The input is rebuilt into the bottom when the Net dropped it (or in verify mode, beside the kept one).
  const bool rebuild = verify_ || !bottom[0]->has_data();
  std::vector<Dtype> rebuilt_storage;
  Dtype* x;
  if (verify_) {
    rebuilt_storage.resize(bottom[0]->count());
    x = rebuilt_storage.data();
  } else {
    x = bottom[0]->mutable_cpu_data();
  }

  // G on y1, then x2 = y2 - G(y1).
  RunForward(g_, y, true);
  if (rebuild) couple(outer_, half_, 1, y, Dtype(-1), g_.output->cpu_data(), x);
  // Back through G with dy2: G's parameter gradients, and dy1 + G'(y1)^T dy2 into G's input diff.
  Dtype* g_out_diff = g_.output->mutable_cpu_diff();
  for (int n = 0; n < outer_; ++n) std::copy_n(half_of(dy, n, 1, half_), half_, g_out_diff + n * half_);
  g_.net->Backward();

  // F on x2 (the stored one in verify mode, which is what back-propagating "from kept values" means), then
  // x1 = y1 - F(x2).
  const Dtype* x_for_f = verify_ ? kept_input_.cpu_data() : x;
  RunForward(f_, x_for_f + half_, true);
  if (rebuild) couple(outer_, half_, 0, y, Dtype(-1), f_.output->cpu_data(), x);
  // y1's gradient, dy1 + G'(y1)^T dy2 (its direct path plus its path through G), is F's output gradient and dx1.
  Dtype* f_out_diff = f_.output->mutable_cpu_diff();
  const Dtype* g_in_diff = g_.input->cpu_diff();
  for (int n = 0; n < outer_; ++n) {
    const Dtype* d = half_of(dy, n, 0, half_);
    for (long i = 0; i < half_; ++i) f_out_diff[n * half_ + i] = d[i] + g_in_diff[n * half_ + i];
  }
  Dtype* dx = propagate_down[0] ? bottom[0]->mutable_cpu_diff() : nullptr;
  if (dx) {
    for (int n = 0; n < outer_; ++n) std::copy_n(f_out_diff + n * half_, half_, half_of(dx, n, 0, half_));
  }
  f_.net->Backward();
  // dx2 = dy2 + F'(x2)^T dy1.
  if (dx) couple(outer_, half_, 1, dy, Dtype(1), f_.input->cpu_diff(), dx);
  if (verify_) {
    const Dtype* kept = kept_input_.cpu_data();
    Dtype worst = 0;
    for (int i = 0; i < kept_input_.count(); ++i) worst = std::max(worst, std::abs(kept[i] - x[i]));
    reconstruction_error_ = worst;
    LOG(INFO) << this->describe() << ": largest reconstruction error " << worst;
  }
  DropActivations(f_);
  DropActivations(g_);
}

STRATA_INSTANTIATE_CLASS(ReversibleLayer);
REGISTER_LAYER_CLASS(Reversible);

}  // namespace strata
