#include "strata/layers/mvn_layer.hpp"

#include <cmath>

#include "shape_layer_util.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/bias_layer.hpp"  // row_sum

namespace strata {

template <typename Dtype>
void MVNLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const MVNParameter& p = this->layer_param_.mvn_param();
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() <= 4) << "MVN takes a bottom of at most 4 axes (Caffe's num, channels, height, "
                                    << "width), got shape " << x.shape_string();
  const int num = x.num(), channels = x.channels();
  rows_ = p.across_channels() ? num : num * channels;
  dim_ = rows_ == 0 ? 0 : x.count() / rows_;
  eps_ = p.eps();
  top[0]->Reshape(std::vector<int>{num, channels, x.height(), x.width()});
  for (Blob<Dtype>* b : {&mean_, &std_}) b->Reshape({rows_});
  grad_.Reshape({2, rows_});
}

template <typename Dtype>
void MVNLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  Dtype* stdev = normalize_variance() ? std_.mutable_cpu_data() : nullptr;
  const int dim = dim_;
  const Dtype eps = eps_;
  // In place, y is x: each element is read before it is written.
  ForEachRow(rows_, bottom[0]->count(), [=](int r) {
    const Dtype* xr = x + static_cast<long long>(r) * dim;
    Dtype* yr = y + static_cast<long long>(r) * dim;
    const Dtype mean = static_cast<Dtype>(row_sum<Dtype>(0, dim, [=](int i) { return xr[i]; }) / dim);
    if (!stdev) {
      for (int i = 0; i < dim; ++i) yr[i] = xr[i] - mean;
      return;
    }
    const double var = row_sum<Dtype>(0, dim, [=](int i) {
                         const Dtype d = xr[i] - mean;
                         return d * d;
                       }) /
                       dim;
    const Dtype s = static_cast<Dtype>(std::sqrt(var)) + eps;
    stdev[r] = s;
    for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) / s;
  });
}

template <typename Dtype>
void MVNLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* dy = top[0]->cpu_diff();
  const Dtype* y = normalize_variance() ? top[0]->cpu_data() : nullptr;
  const Dtype* stdev = normalize_variance() ? std_.cpu_data() : nullptr;
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int dim = dim_;
  // In place, dx is dy: a row's sums are taken before any of it is written.
  ForEachRow(rows_, bottom[0]->count(), [=](int r) {
    const long long base = static_cast<long long>(r) * dim;
    const Dtype* dyr = dy + base;
    Dtype* dxr = dx + base;
    const Dtype mean_dy = static_cast<Dtype>(row_sum<Dtype>(0, dim, [=](int i) { return dyr[i]; }) / dim);
    if (!y) {
      for (int i = 0; i < dim; ++i) dxr[i] = dyr[i] - mean_dy;
      return;
    }
    const Dtype* yr = y + base;
    const Dtype mean_dy_y = static_cast<Dtype>(row_sum<Dtype>(0, dim, [=](int i) { return dyr[i] * yr[i]; }) / dim);
    for (int i = 0; i < dim; ++i) dxr[i] = (dyr[i] - mean_dy - yr[i] * mean_dy_y) / stdev[r];
  });
}

STRATA_INSTANTIATE_CLASS(MVNLayer);
REGISTER_LAYER_CLASS(MVN);

}  // namespace strata
