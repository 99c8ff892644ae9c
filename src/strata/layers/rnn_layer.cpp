#include "strata/layers/rnn_layer.hpp"

#include "recurrent_impl.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void RNNLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  RecurrentLayer<Dtype>::Reshape(bottom, top);
  hidden_.Reshape({this->T_, this->N_, this->H_});
}

template <typename Dtype>
void RNNLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<CpuMath<Dtype>>(bottom, top);
}

template <typename Dtype>
void RNNLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  BackwardWith<CpuMath<Dtype>>(top, propagate_down, bottom);
}

STRATA_INSTANTIATE_CLASS(RNNLayer);
REGISTER_LAYER_CLASS(RNN);

}  // namespace strata
