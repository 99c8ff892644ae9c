#include "strata/layers/embed_layer.hpp"

#include "embed_index.hpp"
#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"
#include "weight_and_bias.hpp"

namespace strata {

template <typename Dtype>
void EmbedLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EmbedParameter& p = this->layer_param_.embed_param();
  num_output_ = static_cast<int>(p.num_output());
  input_dim_ = static_cast<int>(p.input_dim());
  bias_term_ = p.bias_term();
  STRATA_REQUIRE(num_output_ > 0) << "Embed: embed_param.num_output must be positive";
  STRATA_REQUIRE(input_dim_ > 0) << "Embed: embed_param.input_dim must be positive";
  // Weights transposed from InnerProduct's, as in Caffe: one row per index.
  const std::vector<int> weight_shape{input_dim_, num_output_};
  SetUpWeightAndBias(&this->blobs_, weight_shape, bias_term_, num_output_, p.weight_filler(), p.bias_filler());
  this->param_propagate_down_.assign(this->blobs_.size(), true);
}

template <typename Dtype>
void EmbedLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  lookups_ = bottom[0]->count();
  std::vector<int> top_shape = bottom[0]->shape();
  top_shape.push_back(num_output_);
  top[0]->Reshape(top_shape);
  if (bias_term_ && bias_multiplier_.count() != lookups_) {
    bias_multiplier_.set_memory_category(MemoryCategory::kWorkspace);
    bias_multiplier_.Reshape({lookups_});
    cpu_set(lookups_, Dtype(1), bias_multiplier_.mutable_cpu_data());
  }
}

template <typename Dtype>
void EmbedLayer<Dtype>::CheckIndex(Dtype value, long long position) const {
  STRATA_REQUIRE(IsEmbedIndex(value, input_dim_))
      << "Embed: input value " << value << " at position " << position << " is not an index in [0, " << input_dim_
      << ") (embed_param.input_dim)";
}

template <typename Dtype>
void EmbedLayer<Dtype>::CheckNoBottomGradient(const std::vector<bool>& propagate_down) const {
  STRATA_REQUIRE(!propagate_down[0]) << "Embed: cannot backpropagate to the input: it holds indices";
}

template <typename Dtype>
void EmbedLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* index = bottom[0]->cpu_data();
  const Dtype* w = this->blobs_[0]->cpu_data();
  const Dtype* bias = bias_term_ ? this->blobs_[1]->cpu_data() : nullptr;
  Dtype* y = top[0]->mutable_cpu_data();
  const int N = num_output_;
  for (int m = 0; m < lookups_; ++m) {
    CheckIndex(index[m], m);
    const Dtype* row = w + static_cast<long>(index[m]) * N;
    Dtype* out = y + static_cast<long>(m) * N;
    for (int d = 0; d < N; ++d) out[d] = bias ? row[d] + bias[d] : row[d];
  }
}

template <typename Dtype>
void EmbedLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  CheckNoBottomGradient(propagate_down);
  const Dtype* dy = top[0]->cpu_diff();
  if (this->param_propagate_down(0)) {
    const Dtype* index = bottom[0]->cpu_data();
    Dtype* dw = this->blobs_[0]->mutable_cpu_diff();
    for (int m = 0; m < lookups_; ++m) {
      CheckIndex(index[m], m);
      cpu_axpy(num_output_, Dtype(1), dy + static_cast<long>(m) * num_output_,
               dw + static_cast<long>(index[m]) * num_output_);
    }
  }
  if (bias_term_ && this->param_propagate_down(1) && lookups_ > 0) {
    cpu_gemv<Dtype>(CblasTrans, lookups_, num_output_, Dtype(1), dy, bias_multiplier_.cpu_data(), Dtype(1),
                    this->blobs_[1]->mutable_cpu_diff());
  }
}

STRATA_INSTANTIATE_CLASS(EmbedLayer);
REGISTER_LAYER_CLASS(Embed);

}  // namespace strata
