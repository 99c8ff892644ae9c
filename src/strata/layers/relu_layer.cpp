#include "strata/layers/relu_layer.hpp"

#include <type_traits>

#include "activation_kernels.hpp"
#include "cpu_engine.hpp"
#include "neuron_math.hpp"
#include "onednn_relu.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ReLULayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  onednn_ = MakeOneDnnEngine<onednn_relu::ReLU, Dtype>(this->layer_param_.relu_param(), "ReLU",
                                                       this->layer_param_.name());
}

template <typename Dtype>
void ReLULayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer<Dtype>::Reshape(bottom, top);
  if (onednn_ && bottom[0]->count() > 0) onednn_->Configure(bottom[0]->count(), static_cast<float>(negative_slope_));
}

template <typename Dtype>
void ReLULayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  const MemoryFormat layout = this->ElementwiseLayout(bottom, top);
  const Dtype* x = bottom[0]->cpu_data_in(layout);
  Dtype* y = top[0]->mutable_cpu_data_in(layout, bottom[0] == top[0]);
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      if (n > 0) onednn_->Forward(x, y);
      return;
    }
  }
  const Dtype slope = negative_slope_;
  // Both forms let NaN through, as Caffe's max(x, 0) + slope * min(x, 0) does.
  if (slope == Dtype(0)) {
    act::map(n, x, y, [](Dtype v) { return neuron::relu(v); });
  } else {
    act::map(n, x, y, [slope](Dtype v) { return neuron::leaky_relu(v, slope); });
  }
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = negative_slope_;
  RequireBackwardNotInPlace(top, bottom);
  const int n = bottom[0]->count();
  // The sign test reads the top for slope >= 0 (y > 0 iff x > 0), so in-place use is exact; else the bottom.
  const MemoryFormat layout = bottom[0]->data_layout();
  const Dtype* s = slope >= 0 ? top[0]->cpu_data_in(layout) : bottom[0]->cpu_data_in(layout);
  const Dtype* dy = top[0]->cpu_diff_in(layout);
  Dtype* dx = bottom[0]->mutable_cpu_diff_in(layout, bottom[0] == top[0]);
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      if (n > 0) onednn_->Backward(s, dy, dx);
      return;
    }
  }
  // Caffe's form: a NaN input gets gradient 0.
  act::map(n, s, dy, dx,
           [slope](Dtype sv, Dtype g) { return g * (Dtype(sv > Dtype(0)) + slope * Dtype(sv <= Dtype(0))); });
}

STRATA_INSTANTIATE_CLASS(ReLULayer);
REGISTER_LAYER_CLASS(ReLU);

}  // namespace strata
