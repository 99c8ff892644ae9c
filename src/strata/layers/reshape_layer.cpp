#include "strata/layers/reshape_layer.hpp"

#include <algorithm>
#include <climits>

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ReshapeLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(top[0] != bottom[0]) << "Reshape cannot run in place";
  const BlobShape& shape = this->layer_param_.reshape_param().shape();
  copy_axes_.clear();
  inferred_axis_ = -1;
  constant_count_ = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const long long dim = shape.dim(i);
    if (dim == 0) {
      copy_axes_.push_back(i);
    } else if (dim == -1) {
      STRATA_REQUIRE(inferred_axis_ == -1) << "reshape_param.shape may hold only one -1 (dimensions "
                                           << inferred_axis_ << " and " << i << " are -1)";
      inferred_axis_ = i;
    } else {
      STRATA_REQUIRE(dim > 0) << "reshape_param.shape dimension " << i << " is " << dim
                              << ": use a positive size, 0 to copy the bottom's or -1 to infer it";
      constant_count_ *= dim;
      STRATA_REQUIRE(constant_count_ <= INT_MAX) << "reshape_param.shape holds more than INT_MAX values";
    }
  }
}

template <typename Dtype>
void ReshapeLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ReshapeParameter& p = this->layer_param_.reshape_param();
  const Blob<Dtype>& x = *bottom[0];
  // The range [start, end) of the bottom's axes that the new shape replaces.
  const int start = p.axis() >= 0 ? p.axis() : x.num_axes() + p.axis() + 1;
  STRATA_REQUIRE(start >= 0 && start <= x.num_axes())
      << "reshape_param.axis " << p.axis() << " out of range for a bottom of shape " << x.shape_string();
  STRATA_REQUIRE(p.num_axes() >= -1) << "reshape_param.num_axes must be non-negative, or -1 for all axes from "
                                     << "`axis` on, got " << p.num_axes();
  const int end = p.num_axes() == -1 ? x.num_axes() : start + p.num_axes();
  STRATA_REQUIRE(end <= x.num_axes()) << "reshape_param.axis " << p.axis() << " with num_axes " << p.num_axes()
                                      << " extends past the bottom of shape " << x.shape_string();
  const BlobShape& new_dims = p.shape();
  std::vector<int> shape(x.shape().begin(), x.shape().begin() + start);
  for (int i = 0; i < new_dims.dim_size(); ++i) shape.push_back(static_cast<int>(new_dims.dim(i)));
  shape.insert(shape.end(), x.shape().begin() + end, x.shape().end());
  // A 0 copies the bottom's dimension at the same position counted from `start`.
  for (int i : copy_axes_) {
    STRATA_REQUIRE(start + i < x.num_axes())
        << "reshape_param.shape dimension " << i << " is 0 but the bottom of shape " << x.shape_string()
        << " has no axis " << start + i << " to copy";
    shape[start + i] = x.shape(start + i);
  }
  if (inferred_axis_ >= 0) {
    long long known = constant_count_ * x.count(0, start) * x.count(end);
    for (int i : copy_axes_) known *= shape[start + i];
    STRATA_REQUIRE(known != 0 && x.count() % known == 0)
        << "cannot infer the -1 dimension: the bottom's " << x.count() << " values (shape " << x.shape_string()
        << ") are not a multiple of the " << known << " that the other dimensions give";
    shape[start + inferred_axis_] = static_cast<int>(x.count() / known);
  }
  long long count = 1;
  for (int d : shape) count = std::min<long long>(count * d, 1LL + INT_MAX);  // saturates: a mismatch anyway
  STRATA_REQUIRE(count == x.count()) << "the new shape holds " << count << " values, the bottom of shape "
                                     << x.shape_string() << " holds " << x.count();
  top[0]->Reshape(shape);
  top[0]->ShareData(x);
  top[0]->ShareDiff(x);
}

STRATA_INSTANTIATE_CLASS(ReshapeLayer);
REGISTER_LAYER_CLASS(Reshape);

}  // namespace strata
