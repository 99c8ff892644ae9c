#include "strata/layers/lstm_layer.hpp"

#include "recurrent_impl.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void LSTMLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  RecurrentLayer<Dtype>::Reshape(bottom, top);
  cells_.Reshape({this->T_, this->N_, this->H_});
  dh_.Reshape({this->N_, this->H_});
}

template <typename Dtype>
void LSTMLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<CpuMath<Dtype>>(bottom, top);
}

template <typename Dtype>
void LSTMLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  BackwardWith<CpuMath<Dtype>>(top, propagate_down, bottom);
}

STRATA_INSTANTIATE_CLASS(LSTMLayer);
REGISTER_LAYER_CLASS(LSTM);

}  // namespace strata
