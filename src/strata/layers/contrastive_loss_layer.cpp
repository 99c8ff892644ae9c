#include "strata/layers/contrastive_loss_layer.hpp"

#include "loss_terms.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// Whether a blob holds one row per item: N, N x C, or N x C with trailing axes of 1 (Caffe's height = width = 1).
template <typename Dtype>
bool is_rows(const Blob<Dtype>& b) {
  return b.num_axes() <= 2 || b.count(2) == 1;
}

}  // namespace

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  const Blob<Dtype>& a = *bottom[0];
  const Blob<Dtype>& b = *bottom[1];
  const Blob<Dtype>& y = *bottom[2];
  STRATA_REQUIRE(is_rows(a) && is_rows(b) && a.count(1) == b.count(1))
      << this->describe() << ": bottoms 0 and 1 must be N x C features of the same C (N x C x 1 x 1 also does), got "
      << "shapes " << a.shape_string() << " and " << b.shape_string();
  STRATA_REQUIRE(y.num_axes() > 0 && y.shape(0) == a.shape(0) && y.count() == a.shape(0))
      << this->describe() << ": bottom 2 must hold one similarity label per pair (" << a.shape(0)
      << "), got shape " << y.shape_string();
  num_ = a.shape(0);
  channels_ = a.count(1);
  dist_sq_.Reshape({num_});
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* a = bottom[0]->cpu_data();
  const Dtype* b = bottom[1]->cpu_data();
  const Dtype* y = bottom[2]->cpu_data();
  const int C = channels_;
  Dtype* d2 = dist_sq_.mutable_cpu_data();
  loss::for_each(num_, static_cast<long long>(num_) * C, [=](long long i) {
    double s = 0;
    for (int c = 0; c < C; ++c) {
      const double d = static_cast<double>(a[i * C + c]) - b[i * C + c];
      s += d * d;
    }
    d2[i] = static_cast<Dtype>(s);
  });
  const auto& p = this->layer_param_.contrastive_loss_param();
  const double margin = p.margin();
  const bool legacy = p.legacy_version();
  const loss::Totals t = loss::sum_terms(num_, num_, [=](long long i) {
    return loss::counted(loss::contrastive_term(d2[i], loss::similar_pair(y[i]), margin, legacy));
  });
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(t.value / num_ / 2);
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 2, "similarity labels");
  const Dtype* a = bottom[0]->cpu_data();
  const Dtype* b = bottom[1]->cpu_data();
  const Dtype* y = bottom[2]->cpu_data();
  const Dtype* d2 = dist_sq_.cpu_data();
  const auto& p = this->layer_param_.contrastive_loss_param();
  const double margin = p.margin();
  const bool legacy = p.legacy_version();
  const int C = channels_;
  for (int side = 0; side < 2; ++side) {
    if (!propagate_down[side]) continue;
    const double alpha = (side == 0 ? 1.0 : -1.0) * top[0]->cpu_diff()[0] / num_;
    Dtype* dx = bottom[side]->mutable_cpu_diff();
    loss::for_each(num_, static_cast<long long>(num_) * C, [=](long long i) {
      const Dtype g =
          static_cast<Dtype>(alpha * loss::contrastive_factor(d2[i], loss::similar_pair(y[i]), margin, legacy));
      for (int c = 0; c < C; ++c) dx[i * C + c] = g * (a[i * C + c] - b[i * C + c]);
    });
  }
}

STRATA_INSTANTIATE_CLASS(ContrastiveLossLayer);
REGISTER_LAYER_CLASS(ContrastiveLoss);

}  // namespace strata
