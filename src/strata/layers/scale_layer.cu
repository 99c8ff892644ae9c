#include "strata/cuda.hpp"
#include "strata/layers/scale_layer.hpp"

namespace strata {

template <typename Dtype>
void ScaleLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const Dtype* x = bottom[0]->gpu_data();
  // In place, the scale's gradient needs the input that the output overwrites.
  input_copied_ = top[0] == bottom[0] && (bottom.size() > 1 || this->param_propagate_down(0));
  if (input_copied_) gpu_copy(bottom[0]->count(), x, input_copy_.mutable_gpu_data());
  const Dtype* bias = bias_param_id_ >= 0 ? this->blobs_[bias_param_id_]->gpu_data() : nullptr;
  gpu_broadcast_affine<Dtype>(geom_, x, scale(bottom).gpu_data(), bias, top[0]->mutable_gpu_data());
}

template <typename Dtype>
void ScaleLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  // Parameter gradients first: in place, writing the bottom's diff overwrites the top's.
  const Dtype* dy = top[0]->gpu_diff();
  if (bias_param_id_ >= 0 && this->param_propagate_down(bias_param_id_)) {
    gpu_broadcast_reduce<Dtype>(geom_, dy, nullptr, true, this->blobs_[bias_param_id_]->mutable_gpu_diff());
  }
  const bool scale_is_bottom = bottom.size() > 1;
  if (scale_is_bottom ? propagate_down[1] : this->param_propagate_down(0)) {
    const bool in_place = top[0] == bottom[0];
    CHECK(!in_place || input_copied_) << "in-place Scale: the forward pass kept no copy of the input";
    const Dtype* x = in_place ? input_copy_.gpu_data() : bottom[0]->gpu_data();
    Dtype* ds = scale_is_bottom ? bottom[1]->mutable_gpu_diff() : this->blobs_[0]->mutable_gpu_diff();
    gpu_broadcast_reduce<Dtype>(geom_, x, dy, !scale_is_bottom, ds);
  }
  if (propagate_down[0]) {
    gpu_broadcast_affine<Dtype>(geom_, dy, scale(bottom).gpu_data(), nullptr, bottom[0]->mutable_gpu_diff());
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ScaleLayer);

}  // namespace strata
