#include "strata/layers/accuracy_layer.hpp"

#include "activation_kernels.hpp"
#include "label_error.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
AccuracyLayer<Dtype>::AccuracyLayer(const LayerParameter& param) : Layer<Dtype>(param) {
  class_counts_.set_memory_category(MemoryCategory::kWorkspace);
}

template <typename Dtype>
void AccuracyLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const AccuracyParameter& p = this->layer_param_.accuracy_param();
  STRATA_REQUIRE(p.top_k() >= 1 && p.top_k() <= static_cast<uint32_t>(INT_MAX))
      << "accuracy_param.top_k must be positive, got " << p.top_k();
  top_k_ = static_cast<int>(p.top_k());
  has_ignore_label_ = p.has_ignore_label();
  ignore_label_ = p.ignore_label();
}

template <typename Dtype>
void AccuracyLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() > 0) << "the scores need at least one axis";
  const int axis = bottom[0]->CanonicalAxisIndex(this->layer_param_.accuracy_param().axis());
  outer_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_ = bottom[0]->count(axis + 1);
  STRATA_REQUIRE(top_k_ <= channels_) << "accuracy_param.top_k (" << top_k_
                                      << ") must not exceed the number of classes (" << channels_ << ")";
  STRATA_REQUIRE(static_cast<long long>(outer_) * inner_ == bottom[1]->count())
      << "the labels must give one class per prediction: scores of shape " << bottom[0]->shape_string()
      << " with classes along axis " << axis << " need " << static_cast<long long>(outer_) * inner_ << " labels, got "
      << bottom[1]->count() << " (shape " << bottom[1]->shape_string() << ")";
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) {
    top[1]->Reshape({channels_});
    class_counts_.Reshape({channels_});
  }
}

template <typename Dtype>
void AccuracyLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* scores = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int C = channels_, inner = inner_;
  const bool per_class = top.size() > 1;
  Dtype* class_correct = per_class ? top[1]->mutable_cpu_data() : nullptr;
  Dtype* class_total = per_class ? class_counts_.mutable_cpu_data() : nullptr;
  if (per_class) {
    cpu_set(C, Dtype(0), class_correct);
    cpu_set(C, Dtype(0), class_total);
  }
  long long correct = 0, total = 0;
  for (int o = 0; o < outer_; ++o) {
    for (int i = 0; i < inner; ++i) {
      const Dtype v = labels[static_cast<long long>(o) * inner + i];
      const int l = act::class_of(v, C, has_ignore_label_, ignore_label_);
      if (l == act::kIgnoredLabel) continue;
      STRATA_REQUIRE(l != act::kBadLabel) << BadLabelMessage(this->describe(), v, static_cast<long long>(o) * inner + i,
                                                            inner, C, has_ignore_label_, ignore_label_);
      const Dtype* s = scores + static_cast<long long>(o) * C * inner + i;
      const Dtype label_score = s[static_cast<long long>(l) * inner];
      // Classes scoring at least as high as the label's, the label itself included: correct when the others
      // number fewer than top_k.
      int at_least = 0;
      for (int c = 0; c < C && at_least <= top_k_; ++c) at_least += s[static_cast<long long>(c) * inner] >= label_score;
      const bool hit = at_least - 1 < top_k_;
      correct += hit;
      ++total;
      if (per_class) {
        class_total[l] += 1;
        class_correct[l] += hit;
      }
    }
  }
  top[0]->mutable_cpu_data()[0] = total == 0 ? Dtype(0) : static_cast<Dtype>(static_cast<double>(correct) / total);
  if (per_class) {
    for (int c = 0; c < C; ++c) class_correct[c] = class_total[c] == 0 ? Dtype(0) : class_correct[c] / class_total[c];
  }
}

template <typename Dtype>
void AccuracyLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                        const BlobVec& bottom) {
  for (size_t b = 0; b < propagate_down.size(); ++b) {
    STRATA_REQUIRE(!propagate_down[b]) << "Accuracy has no gradient (asked for bottom " << b << ")";
  }
}

STRATA_INSTANTIATE_CLASS(AccuracyLayer);
REGISTER_LAYER_CLASS(Accuracy);

}  // namespace strata
