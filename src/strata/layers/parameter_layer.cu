#include "strata/cuda.hpp"
#include "strata/layers/parameter_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

template <typename Dtype>
void ParameterLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  gpu_copy(top[0]->count(), this->blobs_[0]->gpu_data(), top[0]->mutable_gpu_data());
}

template <typename Dtype>
void ParameterLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  if (!this->param_propagate_down(0)) return;
  gpu_axpy(top[0]->count(), Dtype(1), top[0]->gpu_diff(), this->blobs_[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ParameterLayer);

}  // namespace strata
