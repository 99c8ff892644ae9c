#include "strata/layers/reduction_layer.hpp"

#include "shape_layer_util.hpp"
#include "strata/layer_factory.hpp"
#include "strata/layers/bias_layer.hpp"  // row_sum

namespace strata {

template <typename Dtype>
void ReductionLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ReductionParameter& p = this->layer_param_.reduction_param();
  const Blob<Dtype>& x = *bottom[0];
  const int axis = CheckedAxis(x, p.axis(), "reduction_param.axis");
  op_ = p.operation();
  top[0]->Reshape(std::vector<int>(x.shape().begin(), x.shape().begin() + axis));
  num_ = x.count(0, axis);
  dim_ = x.count(axis);
  coeff_ = p.coeff();
  if (op_ == ReductionParameter::MEAN) coeff_ /= dim_;
}

template <typename Dtype>
void ReductionLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  const int dim = dim_;
  const auto op = op_;
  const Dtype coeff = coeff_;
  ForEachRow(num_, bottom[0]->count(), [=](int r) {
    const Dtype* xr = x + static_cast<long long>(r) * dim;
    double s = 0;
    switch (op) {
      case ReductionParameter::ASUM:
        s = row_sum<Dtype>(0, dim, [=](int i) { return std::fabs(xr[i]); });
        break;
      case ReductionParameter::SUMSQ:
        s = row_sum<Dtype>(0, dim, [=](int i) { return xr[i] * xr[i]; });
        break;
      default:  // SUM, MEAN (whose 1/dim is in coeff)
        s = row_sum<Dtype>(0, dim, [=](int i) { return xr[i]; });
    }
    y[r] = coeff * static_cast<Dtype>(s);
  });
}

template <typename Dtype>
void ReductionLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* x = BackwardNeedsBottomData() ? bottom[0]->cpu_data() : nullptr;
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  const int dim = dim_;
  const auto op = op_;
  const Dtype coeff = coeff_;
  ForEachRow(num_, bottom[0]->count(), [=](int r) {
    const long long base = static_cast<long long>(r) * dim;
    const Dtype g = coeff * dy[r];
    for (int i = 0; i < dim; ++i) {
      const long long k = base + i;
      switch (op) {
        case ReductionParameter::ASUM:
          dx[k] = g * static_cast<Dtype>((Dtype(0) < x[k]) - (x[k] < Dtype(0)));
          break;
        case ReductionParameter::SUMSQ:
          dx[k] = Dtype(2) * g * x[k];
          break;
        default:
          dx[k] = g;
      }
    }
  });
}

STRATA_INSTANTIATE_CLASS(ReductionLayer);
REGISTER_LAYER_CLASS(Reduction);

}  // namespace strata
