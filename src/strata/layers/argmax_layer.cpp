#include "strata/layers/argmax_layer.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include "shape_layer_util.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ArgMaxLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ArgMaxParameter& p = this->layer_param_.argmax_param();
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(p.top_k() >= 1) << "argmax_param.top_k must be at least 1, got " << p.top_k();
  STRATA_REQUIRE(x.num_axes() >= 1) << "ArgMax needs a bottom with at least one axis, got shape " << x.shape_string();
  std::vector<int> shape;
  if (p.has_axis()) {
    const int axis = CheckedAxis(x, p.axis(), "argmax_param.axis");
    dim_ = x.shape(axis);
    stride_ = x.count(axis + 1);
    STRATA_REQUIRE(p.top_k() <= static_cast<unsigned>(dim_))
        << "argmax_param.top_k " << p.top_k() << " exceeds the extent " << dim_ << " of axis " << axis
        << " of the bottom of shape " << x.shape_string();
    shape = x.shape();
    shape[axis] = static_cast<int>(p.top_k());
  } else {
    dim_ = x.count(1);
    stride_ = 1;
    STRATA_REQUIRE(p.top_k() <= static_cast<unsigned>(dim_))
        << "argmax_param.top_k " << p.top_k() << " exceeds the " << dim_
        << " values per item (axes 1 and on) of the bottom of shape " << x.shape_string();
    // (N, 1 or 2, top_k), padded with 1s to the bottom's number of axes.
    shape.assign(std::max(3, x.num_axes()), 1);
    shape[0] = x.shape(0);
    shape[1] = p.out_max_val() ? 2 : 1;
    shape[2] = static_cast<int>(p.top_k());
  }
  top_k_ = static_cast<int>(p.top_k());
  searches_ = dim_ == 0 ? 0 : x.count() / dim_;
  top[0]->Reshape(shape);
}

template <typename Dtype>
void ArgMaxLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const ArgMaxParameter& p = this->layer_param_.argmax_param();
  const bool values = p.out_max_val();
  const bool has_axis = p.has_axis();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  std::vector<std::pair<Dtype, int>> pairs(dim_);
  for (int i = 0; i < searches_; ++i) {
    // Search i reads the dim_ values (stride_ apart) at position (outer, inner) of the other axes, and writes
    // its results at the same position of the top, whose searched axis has top_k_ entries instead of dim_.
    const int outer = i / stride_, inner = i % stride_;
    const Dtype* in = x + static_cast<long long>(outer) * dim_ * stride_ + inner;
    for (int j = 0; j < dim_; ++j) pairs[j] = std::make_pair(in[static_cast<long long>(j) * stride_], j);
    std::partial_sort(pairs.begin(), pairs.begin() + top_k_, pairs.end(), std::greater<std::pair<Dtype, int>>());
    if (values && !has_axis) {
      // (N, 2, top_k): the indices, then the values.
      for (int j = 0; j < top_k_; ++j) {
        y[2 * i * top_k_ + j] = static_cast<Dtype>(pairs[j].second);
        y[2 * i * top_k_ + top_k_ + j] = pairs[j].first;
      }
      continue;
    }
    Dtype* out = y + static_cast<long long>(outer) * top_k_ * stride_ + inner;
    for (int j = 0; j < top_k_; ++j) {
      out[static_cast<long long>(j) * stride_] = values ? pairs[j].first : static_cast<Dtype>(pairs[j].second);
    }
  }
}

template <typename Dtype>
void ArgMaxLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[0])
      << this->describe() << " has no gradient (Caffe defines none): keep it off the path to the loss, or give it "
      << "propagate_down: false";
}

STRATA_INSTANTIATE_CLASS(ArgMaxLayer);
REGISTER_LAYER_CLASS(ArgMax);

}  // namespace strata
