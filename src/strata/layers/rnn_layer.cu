#include "recurrent_impl.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/rnn_layer.hpp"

namespace strata {

// The CPU's passes, over the device's operations (recurrent_impl.hpp; the kernels are in recurrent_math.cu).
template <typename Dtype>
void RNNLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  ForwardWith<GpuMath<Dtype>>(bottom, top);
}

template <typename Dtype>
void RNNLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  BackwardWith<GpuMath<Dtype>>(top, propagate_down, bottom);
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(RNNLayer);

}  // namespace strata
