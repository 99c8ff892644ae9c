#include "strata/layers/hinge_loss_layer.hpp"

#include <climits>

#include "label_error.hpp"
#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void HingeLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  l2_ = this->layer_param_.hinge_loss_param().norm() == HingeLossParameter::L2;
  num_ = bottom[0]->shape(0);
  dim_ = bottom[0]->count(1);
  STRATA_REQUIRE(bottom[1]->count() == num_)
      << this->describe() << ": the labels must give one class per item (" << num_ << "), got shape "
      << bottom[1]->shape_string();
}

template <typename Dtype>
void HingeLossLayer<Dtype>::SetLoss(double sum, long long first_bad, const BlobVec& bottom, const BlobVec& top) {
  if (first_bad != LLONG_MAX) {
    const long long item = first_bad / dim_;
    STRATA_FAIL() << BadLabelMessage(this->describe(), bottom[1]->cpu_data()[item], item, 1, dim_, false, 0);
  }
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(sum / num_);
}

template <typename Dtype>
void HingeLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int K = dim_;
  const bool l2 = l2_;
  const long long n = bottom[0]->count();
  const loss::Totals t = loss::sum_terms(n, n, [=](long long k) { return loss::hinge_term(k, x, labels, K, l2); });
  SetLoss(t.value, t.first_bad, bottom, top);
}

template <typename Dtype>
void HingeLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "labels");
  if (!propagate_down[0]) return;
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const Dtype scale = top[0]->cpu_diff()[0] / num_;
  const int K = dim_;
  const bool l2 = l2_;
  const long long n = bottom[0]->count();
  loss::for_each(n, n, [=](long long k) { dx[k] = loss::hinge_grad(k, x, labels, K, l2) * scale; });
}

STRATA_INSTANTIATE_CLASS(HingeLossLayer);
REGISTER_LAYER_CLASS(HingeLoss);

}  // namespace strata
