#include "strata/layers/parameter_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ParameterLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BlobShape& shape = this->layer_param_.parameter_param().shape();
  for (int d = 0; d < shape.dim_size(); ++d) {
    STRATA_REQUIRE(shape.dim(d) > 0) << "parameter_param.shape has dimension " << d << " = " << shape.dim(d)
                                     << "; every dimension must be positive";
  }
  if (this->blobs_.empty()) {
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>());
    this->blobs_[0]->Reshape(shape);
    cpu_set(this->blobs_[0]->count(), Dtype(0), this->blobs_[0]->mutable_cpu_data());
  } else {
    // The value came with the layer (a caffemodel): it must be the blob the prototxt describes.
    Blob<Dtype> wanted;
    wanted.Reshape(shape);
    STRATA_REQUIRE(this->blobs_.size() == 1 && this->blobs_[0]->shape() == wanted.shape())
        << this->describe() << " comes with " << this->blobs_.size() << " blob(s) of shape "
        << this->blobs_[0]->shape_string() << "; parameter_param.shape asks for one of shape "
        << wanted.shape_string();
  }
  this->param_propagate_down_.assign(1, true);
}

template <typename Dtype>
void ParameterLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  cpu_copy(top[0]->count(), this->blobs_[0]->cpu_data(), top[0]->mutable_cpu_data());
}

template <typename Dtype>
void ParameterLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  if (!this->param_propagate_down(0)) return;
  cpu_axpy(top[0]->count(), Dtype(1), top[0]->cpu_diff(), this->blobs_[0]->mutable_cpu_diff());
}

STRATA_INSTANTIATE_CLASS(ParameterLayer);
REGISTER_LAYER_CLASS(Parameter);

}  // namespace strata
