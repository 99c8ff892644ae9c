#include "strata/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include "activation_kernels.hpp"
#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::LayerSetUp(bottom, top);
  const LossParameter& lp = this->layer_param_.loss_param();
  normalization_ = LossNormalization(lp, LossParameter::BATCH_SIZE);
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  STRATA_REQUIRE(bottom[0]->count() == bottom[1]->count())
      << this->describe() << ": the scores and the targets must have the same count, got shapes "
      << bottom[0]->shape_string() << " and " << bottom[1]->shape_string();
  outer_ = bottom[0]->shape(0);
  inner_ = bottom[0]->count(1);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::SetLoss(double sum, long long valid, Blob<Dtype>* top) {
  const double normaliser = LossNormaliser(normalization_, outer_, inner_, valid);
  normaliser_ = static_cast<Dtype>(normaliser);
  top->mutable_cpu_data()[0] = static_cast<Dtype>(sum / normaliser);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* t = bottom[1]->cpu_data();
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  const long long n = bottom[0]->count();
  const loss::Totals totals = loss::sum_terms(n, 20 * n, [=](long long k) {
    return loss::is_ignored(t[k], has_ignore, ignore) ? loss::skipped()
                                                       : loss::counted(loss::sigmoid_cross_entropy(x[k], t[k]));
  });
  SetLoss(totals.value, totals.counted, top[0]);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                       const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "targets");
  if (!propagate_down[0]) return;
  const Dtype scale = top[0]->cpu_diff()[0] / normaliser_;
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  act::map(bottom[0]->count(), bottom[0]->cpu_data(), bottom[1]->cpu_data(), bottom[0]->mutable_cpu_diff(),
           [=](Dtype x, Dtype t) {
             return loss::is_ignored(t, has_ignore, ignore) ? Dtype(0) : (act::sigmoid(x) - t) * scale;
           });
}

STRATA_INSTANTIATE_CLASS(SigmoidCrossEntropyLossLayer);
REGISTER_LAYER_CLASS(SigmoidCrossEntropyLoss);

}  // namespace strata
