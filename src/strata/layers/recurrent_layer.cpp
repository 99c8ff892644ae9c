#include "strata/layers/recurrent_layer.hpp"

#include "strata/filler.hpp"

namespace strata {

namespace {

// Caffe's shape rules for x and cont, checked at setup and at every reshape.
template <typename Dtype>
void CheckSequenceShapes(const std::string& who, const Blob<Dtype>& x, const Blob<Dtype>& cont) {
  STRATA_REQUIRE(x.num_axes() >= 2) << who << ": bottom[0] (x) must have at least 2 axes -- (#timesteps, #streams, "
                                    << "...), got shape " << x.shape_string();
  STRATA_REQUIRE(cont.num_axes() == 2) << who << ": bottom[1] (cont) must have exactly 2 axes -- (#timesteps, "
                                       << "#streams), got shape " << cont.shape_string();
  STRATA_REQUIRE(cont.shape(0) == x.shape(0) && cont.shape(1) == x.shape(1))
      << who << ": bottom[1] (cont) of shape " << cont.shape_string() << " does not match the " << x.shape(0)
      << " timesteps x " << x.shape(1) << " streams of bottom[0] (x), shape " << x.shape_string();
}

}  // namespace

template <typename Dtype>
void RecurrentLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const RecurrentParameter& p = this->layer_param_.recurrent_param();
  STRATA_REQUIRE(p.num_output() > 0) << this->describe() << ": recurrent_param.num_output must be positive";
  CheckSequenceShapes(this->describe(), *bottom[0], *bottom[1]);
  T_ = bottom[0]->shape(0);
  N_ = bottom[0]->shape(1);
  H_ = static_cast<int>(p.num_output());
  input_dim_ = bottom[0]->count(2);
  // As Caffe: one bottom more than x, cont and the exposed states is the static input.
  static_input_ = static_cast<int>(bottom.size()) > 2 + (expose_hidden() ? NumStates() : 0);
  static_dim_ = 0;
  if (static_input_) {
    const Blob<Dtype>& xs = *bottom[static_index()];
    STRATA_REQUIRE(xs.num_axes() >= 1 && xs.shape(0) == N_)
        << this->describe() << ": bottom[2] (x_static) must be #streams x ..., with " << N_ << " streams, got shape "
        << xs.shape_string();
    static_dim_ = xs.count(1);
  }

  // The parameters, in Caffe's order.
  const int G = GateDim();
  std::vector<std::vector<int>> shapes = {{G, input_dim_}, {G}};
  std::vector<bool> is_bias = {false, true};
  if (static_input_) {
    shapes.push_back({G, static_dim_});
    is_bias.push_back(false);
  }
  shapes.push_back({G, H_});
  is_bias.push_back(false);
  for (const auto& s : ExtraParamShapes()) shapes.push_back(s);
  for (bool b : ExtraParamIsBias()) is_bias.push_back(b);
  if (!this->blobs_.empty()) {
    // Parameters that came with the layer (a caffemodel, or an earlier SetUp): they must fit.
    STRATA_REQUIRE(this->blobs_.size() == shapes.size())
        << this->describe() << ": expected " << shapes.size() << " parameter blobs, got " << this->blobs_.size();
    for (size_t i = 0; i < shapes.size(); ++i) {
      STRATA_REQUIRE(this->blobs_[i]->shape() == shapes[i])
          << this->describe() << ": parameter " << i << " has shape " << this->blobs_[i]->shape_string()
          << ", expected " << Blob<Dtype>(shapes[i]).shape_string();
    }
  } else {
    for (size_t i = 0; i < shapes.size(); ++i) {
      this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shapes[i]));
      GetFiller<Dtype>(is_bias[i] ? p.bias_filler() : p.weight_filler())->Fill(this->blobs_[i].get());
    }
  }
  this->param_propagate_down_.assign(this->blobs_.size(), true);
  // A fresh layer starts from zero states (Reshape zeroes them).
  state_streams_ = -1;
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CheckSequenceShapes(this->describe(), *bottom[0], *bottom[1]);
  STRATA_REQUIRE(bottom[0]->shape(0) == T_)
      << this->describe() << ": input number of timesteps changed from " << T_ << " to " << bottom[0]->shape(0)
      << " (x of shape " << bottom[0]->shape_string() << ")";
  STRATA_REQUIRE(bottom[0]->count(2) == input_dim_)
      << this->describe() << ": x has " << bottom[0]->count(2) << " values per timestep and stream (shape "
      << bottom[0]->shape_string() << "), the weights expect " << input_dim_;
  N_ = bottom[0]->shape(1);
  if (static_input_) {
    const Blob<Dtype>& xs = *bottom[static_index()];
    STRATA_REQUIRE(xs.num_axes() >= 1 && xs.shape(0) == N_ && xs.count(1) == static_dim_)
        << this->describe() << ": bottom[2] (x_static) of shape " << xs.shape_string() << " must be " << N_
        << " streams of " << static_dim_ << " values";
  }
  const std::vector<int> state_shape = {1, N_, H_};
  if (expose_hidden()) {
    for (int s = 0; s < NumStates(); ++s) {
      const Blob<Dtype>& b = *bottom[state_bottom(s)];
      STRATA_REQUIRE(b.shape() == state_shape)
          << this->describe() << ": shape mismatch - the initial state bottom[" << state_bottom(s) << "] has shape "
          << b.shape_string() << ", expected " << Blob<Dtype>(state_shape).shape_string()
          << " (1 x #streams x num_output)";
    }
  }
  const int G = GateDim();
  gates_.Reshape({T_, N_, G});
  if (static_input_) static_gates_.Reshape({N_, G});
  conted_.Reshape({N_, H_});
  for (int s = 0; s < NumStates(); ++s) {
    carry_[s].Reshape({N_, H_});
    state0_[s].Reshape(state_shape);
    stateT_[s].Reshape(state_shape);
  }
  // The carried state belongs to N streams: a new N starts them all from zero.
  if (!expose_hidden() && state_streams_ != N_) {
    Reset();
    state_streams_ = N_;
  }
  top[0]->Reshape({T_, N_, H_});
  if (expose_hidden()) {
    for (int s = 0; s < NumStates(); ++s) top[1 + s]->Reshape(state_shape);
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Reset() {
  for (int s = 0; s < NumStates(); ++s) {
    cpu_set(stateT_[s].count(), Dtype(0), stateT_[s].mutable_cpu_data());
    cpu_set(state0_[s].count(), Dtype(0), state0_[s].mutable_cpu_data());
  }
}

template <typename Dtype>
typename Layer<Dtype>::CarriedState RecurrentLayer<Dtype>::carried_state() {
  typename Layer<Dtype>::CarriedState state;
  if (expose_hidden()) return state;  // the caller passes the state in and out
  for (int s = 0; s < NumStates(); ++s) {
    state.start.push_back(&state0_[s]);
    state.next.push_back(&stateT_[s]);
  }
  return state;
}

template <typename Dtype>
void RecurrentLayer<Dtype>::CheckNoContGradient(const std::vector<bool>& propagate_down) const {
  STRATA_REQUIRE(!propagate_down[1]) << this->describe()
                                     << ": cannot backpropagate to sequence indicators (bottom[1], cont)";
}

STRATA_INSTANTIATE_CLASS(RecurrentLayer);

}  // namespace strata
