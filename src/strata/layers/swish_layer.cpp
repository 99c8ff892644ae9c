#include "strata/layers/swish_layer.hpp"

#include "activation_kernels.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SwishLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer<Dtype>::Reshape(bottom, top);
  input_.Reshape(*bottom[0], bottom[0] == top[0]);
}

template <typename Dtype>
void SwishLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  input_.Keep(*bottom[0], bottom[0] == top[0]);
  const Dtype beta = beta_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), top[0]->mutable_cpu_data(),
           [beta](Dtype x) { return x * act::sigmoid(beta * x); });
}

template <typename Dtype>
void SwishLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype beta = beta_;
  // s = sigmoid(beta x) again; Caffe's dy (beta y + s (1 - beta y)) written as dy (s + beta y (1 - s)), which
  // does not cancel for large positive x (beta y and 1 - beta y both large there).
  act::map(bottom[0]->count(), input_.cpu_input(*bottom[0], bottom[0] == top[0]), top[0]->cpu_diff(),
           bottom[0]->mutable_cpu_diff(), [beta](Dtype x, Dtype dy) {
             const Dtype s = act::sigmoid(beta * x);
             const Dtype by = beta * (x * s);
             return dy * (s + by * (Dtype(1) - s));
           });
}

STRATA_INSTANTIATE_CLASS(SwishLayer);
REGISTER_LAYER_CLASS(Swish);

}  // namespace strata
