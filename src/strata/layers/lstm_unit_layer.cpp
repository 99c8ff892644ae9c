#include "recurrent_impl.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/lstm_layer.hpp"

namespace strata {

template <typename Dtype>
void LSTMUnitLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  // Caffe's rules: c_prev and x are 1 x N x ..., cont is 1 x N, and x holds the 4 gates of c_prev's H units.
  const int streams = bottom[0]->num_axes() >= 2 ? bottom[0]->shape(1) : -1;
  const char* names[] = {"bottom[0] (c_prev)", "bottom[1] (x)", "bottom[2] (cont)"};
  for (int i = 0; i < 3; ++i) {
    const int axes = i == 2 ? 2 : 3;
    STRATA_REQUIRE(bottom[i]->num_axes() == axes && bottom[i]->shape(0) == 1 && bottom[i]->shape(1) == streams)
        << this->describe() << ": " << names[i] << " has shape " << bottom[i]->shape_string() << ", expected "
        << (i == 2 ? "1 x #streams" : "1 x #streams x ...") << " (" << axes << " axes, #streams = " << streams
        << " from bottom[0])";
  }
  H_ = bottom[0]->shape(2);
  STRATA_REQUIRE(bottom[1]->shape(2) == 4 * H_) << this->describe() << ": bottom[1] (x) must hold 4 x " << H_
                                                << " gate inputs per stream, got shape " << bottom[1]->shape_string();
  top[0]->ReshapeLike(*bottom[0]);
  top[1]->ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void LSTMUnitLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<CpuMath<Dtype>>(bottom, top);
}

template <typename Dtype>
void LSTMUnitLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                        const BlobVec& bottom) {
  BackwardWith<CpuMath<Dtype>>(top, propagate_down, bottom);
}

STRATA_INSTANTIATE_CLASS(LSTMUnitLayer);
REGISTER_LAYER_CLASS(LSTMUnit);

}  // namespace strata
