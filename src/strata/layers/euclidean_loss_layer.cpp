#include "strata/layers/euclidean_loss_layer.hpp"

#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  STRATA_REQUIRE(bottom[0]->count(1) == bottom[1]->count(1))
      << this->describe() << ": the two bottoms must have the same number of values per item, got shapes "
      << bottom[0]->shape_string() << " and " << bottom[1]->shape_string();
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* a = bottom[0]->cpu_data();
  const Dtype* b = bottom[1]->cpu_data();
  const long long n = bottom[0]->count();
  const loss::Totals t = loss::sum_terms(n, n, [=](long long k) {
    const double d = static_cast<double>(a[k]) - b[k];
    return loss::counted(d * d);
  });
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(t.value / bottom[0]->shape(0) / 2);
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  const Dtype scale = top[0]->cpu_diff()[0] / bottom[0]->shape(0);
  const Dtype* a = bottom[0]->cpu_data();
  const Dtype* b = bottom[1]->cpu_data();
  const long long n = bottom[0]->count();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const Dtype alpha = i == 0 ? scale : -scale;
    Dtype* dx = bottom[i]->mutable_cpu_diff();
    loss::for_each(n, n, [=](long long k) { dx[k] = alpha * (a[k] - b[k]); });
  }
}

STRATA_INSTANTIATE_CLASS(EuclideanLossLayer);
REGISTER_LAYER_CLASS(EuclideanLoss);

}  // namespace strata
