#include "strata/layers/flatten_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void FlattenLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(top[0] != bottom[0]) << "Flatten cannot run in place";
  const FlattenParameter& p = this->layer_param_.flatten_param();
  const Blob<Dtype>& x = *bottom[0];
  const int start = x.CanonicalAxisIndex(p.axis());
  const int end = x.CanonicalAxisIndex(p.end_axis());
  // As in Caffe, axis == end_axis + 1 flattens nothing and inserts an axis of 1.
  STRATA_REQUIRE(start <= end + 1) << "flatten_param.axis (" << start << ") comes after end_axis (" << end
                                   << ") for a bottom of shape " << x.shape_string();
  std::vector<int> shape(x.shape().begin(), x.shape().begin() + start);
  shape.push_back(x.count(start, end + 1));
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  top[0]->Reshape(shape);
  top[0]->ShareData(x);
  top[0]->ShareDiff(x);
}

STRATA_INSTANTIATE_CLASS(FlattenLayer);
REGISTER_LAYER_CLASS(Flatten);

}  // namespace strata
