#include "strata/layers/loss_layer.hpp"

#include <algorithm>

namespace strata {

template <typename Dtype>
void LossLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  if (this->layer_param_.loss_weight_size() == 0) {
    this->layer_param_.add_loss_weight(1);
    for (size_t t = 1; t < top.size(); ++t) this->layer_param_.add_loss_weight(0);
  }
}

template <typename Dtype>
void LossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() > 0 && bottom[1]->num_axes() > 0 && bottom[0]->shape(0) == bottom[1]->shape(0))
      << this->describe() << ": bottoms 0 and 1 must have the same first dimension (the batch), got shapes "
      << bottom[0]->shape_string() << " and " << bottom[1]->shape_string();
  top[0]->Reshape(std::vector<int>{});
}

template <typename Dtype>
void LossLayer<Dtype>::RefuseGradient(const std::vector<bool>& propagate_down, int b, const char* what) const {
  STRATA_REQUIRE(b >= static_cast<int>(propagate_down.size()) || !propagate_down[b])
      << this->describe() << " cannot backpropagate to its " << what << " (bottom " << b << ")";
}

LossParameter::NormalizationMode LossNormalization(const LossParameter& param,
                                                   LossParameter::NormalizationMode when_unset) {
  if (param.has_normalization()) return param.normalization();
  if (param.has_normalize()) return param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  return when_unset;
}

double LossNormaliser(LossParameter::NormalizationMode mode, long long outer, long long inner, long long valid) {
  double n = 1;
  switch (mode) {
    case LossParameter::FULL:
      n = static_cast<double>(outer) * static_cast<double>(inner);
      break;
    case LossParameter::VALID:
      n = static_cast<double>(valid);
      break;
    case LossParameter::BATCH_SIZE:
      n = static_cast<double>(outer);
      break;
    case LossParameter::NONE:
      n = 1;
      break;
  }
  return std::max(1.0, n);
}

STRATA_INSTANTIATE_CLASS(LossLayer);

}  // namespace strata
