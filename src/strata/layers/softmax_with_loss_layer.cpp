#include "strata/layers/softmax_with_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>

#include "activation_kernels.hpp"
#include "label_error.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  // A loss layer's first top weighs 1 unless the prototxt says otherwise (Caffe's LossLayer); recorded in the
  // layer's parameters so that SetLossWeights and the Net see it.
  if (this->layer_param_.loss_weight_size() == 0) {
    this->layer_param_.add_loss_weight(1);
    for (size_t t = 1; t < top.size(); ++t) this->layer_param_.add_loss_weight(0);
  }
  LayerParameter softmax_param(this->layer_param_);
  softmax_param.set_type("Softmax");
  softmax_param.clear_loss_weight();
  softmax_.reset(new SoftmaxLayer<Dtype>(softmax_param));
  prob_.set_memory_category(MemoryCategory::kActivation);
  probs_ = top.size() > 1 ? top[1] : &prob_;
  softmax_->SetUp({bottom[0]}, {probs_});

  const LossParameter& lp = this->layer_param_.loss_param();
  if (!lp.has_normalization() && lp.has_normalize()) {
    normalization_ = lp.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  } else {
    normalization_ = lp.normalization();
  }
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() > 0 && bottom[1]->num_axes() > 0 && bottom[0]->shape(0) == bottom[1]->shape(0))
      << "the scores and the labels must have the same first dimension, got shapes " << bottom[0]->shape_string()
      << " and " << bottom[1]->shape_string();
  probs_ = top.size() > 1 ? top[1] : &prob_;
  softmax_->Reshape({bottom[0]}, {probs_});
  const int axis = bottom[0]->CanonicalAxisIndex(this->layer_param_.softmax_param().axis());
  outer_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  STRATA_REQUIRE(static_cast<long long>(outer_) * inner_ == bottom[1]->count())
      << "the labels must give one class per prediction: scores of shape " << bottom[0]->shape_string()
      << " with the softmax over axis " << axis << " need " << static_cast<long long>(outer_) * inner_
      << " labels, got " << bottom[1]->count() << " (shape " << bottom[1]->shape_string() << ")";
  top[0]->Reshape(std::vector<int>{});
}

template <typename Dtype>
Dtype SoftmaxWithLossLayer<Dtype>::Normaliser(long long valid) const {
  double n = 1;
  switch (normalization_) {
    case LossParameter::FULL:
      n = static_cast<double>(outer_) * inner_;
      break;
    case LossParameter::VALID:
      n = static_cast<double>(valid);
      break;
    case LossParameter::BATCH_SIZE:
      n = outer_;
      break;
    case LossParameter::NONE:
      n = 1;
      break;
  }
  return static_cast<Dtype>(std::max(1.0, n));
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_->Forward({bottom[0]}, {probs_});
  const Dtype* p = probs_->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int C = channels_, inner = inner_;
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  const long long positions = static_cast<long long>(outer_) * inner;
  double loss = 0;
  long long valid = 0;
  long long first_bad = LLONG_MAX;  // a label cannot be reported from inside the parallel loop
#pragma omp parallel for schedule(static) reduction(+ : loss, valid) reduction(min : first_bad) \
    if (act::use_threads(positions * C))
  for (long long k = 0; k < positions; ++k) {
    const int l = act::class_of(labels[k], C, has_ignore, ignore);
    if (l == act::kIgnoredLabel) continue;
    if (l == act::kBadLabel) {
      first_bad = std::min(first_bad, k);
      continue;
    }
    const long long o = k / inner, i = k % inner;
    loss -= std::log(std::max(p[(o * C + l) * inner + i], Dtype(FLT_MIN)));
    ++valid;
  }
  STRATA_REQUIRE(first_bad == LLONG_MAX)
      << BadLabelMessage(this->describe(), labels[first_bad], first_bad, inner, C, has_ignore, ignore);
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(loss / Normaliser(valid));
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[1]) << "SoftmaxWithLoss cannot backpropagate to its labels (bottom 1)";
  if (!propagate_down[0]) return;
  const Dtype* p = probs_->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int C = channels_, inner = inner_;
  const bool has_ignore = has_ignore_label_;
  const int ignore = ignore_label_;
  const long long positions = static_cast<long long>(outer_) * inner;
  const bool parallel = act::use_threads(positions * C);
  long long valid = 0;
#pragma omp parallel for schedule(static) reduction(+ : valid) if (parallel)
  for (long long k = 0; k < positions; ++k) valid += act::class_of(labels[k], C, has_ignore, ignore) >= 0;
  const Dtype scale = top[0]->cpu_diff()[0] / Normaliser(valid);
  const int n = probs_->count();
  act::map(n, p, dx, [scale](Dtype v) { return v * scale; });
  // Per position: the label's entry becomes (p - 1) * scale; an ignored position gets no gradient.
#pragma omp parallel for schedule(static) if (parallel)
  for (long long k = 0; k < positions; ++k) {
    const int l = act::class_of(labels[k], C, has_ignore, ignore);
    const long long o = k / inner, i = k % inner;
    Dtype* fibre = dx + o * C * inner + i;
    if (l >= 0) {
      fibre[static_cast<long long>(l) * inner] = (p[(o * C + l) * inner + i] - Dtype(1)) * scale;
    } else {
      for (int c = 0; c < C; ++c) fibre[static_cast<long long>(c) * inner] = 0;
    }
  }
}

STRATA_INSTANTIATE_CLASS(SoftmaxWithLossLayer);
REGISTER_LAYER_CLASS(SoftmaxWithLoss);

}  // namespace strata
