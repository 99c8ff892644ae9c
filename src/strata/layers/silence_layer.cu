#include "strata/cuda.hpp"
#include "strata/layers/silence_layer.hpp"
#include "strata/math_functions.hpp"

namespace strata {

// The zero gradients are written where the bottoms' gradients live in GPU mode, on the device.
template <typename Dtype>
void SilenceLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i] && bottom[i]->count() > 0) {
      gpu_set(bottom[i]->count(), Dtype(0), bottom[i]->mutable_gpu_diff());
    }
  }
}

template void SilenceLayer<float>::Backward_gpu(const std::vector<Blob<float>*>&, const std::vector<bool>&,
                                                const std::vector<Blob<float>*>&);
template void SilenceLayer<double>::Backward_gpu(const std::vector<Blob<double>*>&, const std::vector<bool>&,
                                                 const std::vector<Blob<double>*>&);

}  // namespace strata
