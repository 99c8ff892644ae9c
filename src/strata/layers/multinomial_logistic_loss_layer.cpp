#include "strata/layers/multinomial_logistic_loss_layer.hpp"

#include <climits>

#include "label_error.hpp"
#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  // Caffe's rule: the labels' channels, height and width are 1.
  STRATA_REQUIRE(bottom[1]->count(1) == 1)
      << this->describe() << ": the labels must be one class per item (shape N or N x 1 x 1 x 1), got shape "
      << bottom[1]->shape_string();
  num_ = bottom[0]->shape(0);
  dim_ = bottom[0]->count(1);
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::SetLoss(double sum, long long first_bad, const BlobVec& bottom,
                                                  const BlobVec& top) {
  STRATA_REQUIRE(first_bad == LLONG_MAX)
      << BadLabelMessage(this->describe(), bottom[1]->cpu_data()[first_bad], first_bad, 1, dim_, false, 0);
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(sum / num_);
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* p = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int K = dim_;
  const loss::Totals t = loss::sum_terms(num_, num_, [=](long long i) { return loss::logistic_term(i, p, labels, K); });
  SetLoss(t.value, t.first_bad, bottom, top);
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                       const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "labels");
  if (!propagate_down[0]) return;
  const Dtype* p = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  Dtype* dp = bottom[0]->mutable_cpu_diff();
  const Dtype scale = -top[0]->cpu_diff()[0] / num_;
  const int K = dim_;
  const long long n = bottom[0]->count();
  loss::for_each(n, n, [=](long long k) { dp[k] = loss::logistic_grad(k, p, labels, K) * scale; });
}

STRATA_INSTANTIATE_CLASS(MultinomialLogisticLossLayer);
REGISTER_LAYER_CLASS(MultinomialLogisticLoss);

}  // namespace strata
