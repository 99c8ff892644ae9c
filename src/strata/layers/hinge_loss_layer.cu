#include "loss_kernels.cuh"
#include "strata/layers/hinge_loss_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
loss::Totals hinge_sum(long long n, int K, const Dtype* x, const Dtype* labels, bool l2) {
  return loss::gpu_sum_terms(n, [=] __device__(long long k) { return loss::hinge_term(k, x, labels, K, l2); });
}

template <typename Dtype>
void hinge_backward(long long n, int K, const Dtype* x, const Dtype* labels, bool l2, Dtype scale, Dtype* dx) {
  loss::gpu_for_each(n, [=] __device__(long long k) { dx[k] = loss::hinge_grad(k, x, labels, K, l2) * scale; });
}

}  // namespace

template <typename Dtype>
void HingeLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const loss::Totals t = hinge_sum(bottom[0]->count(), dim_, bottom[0]->gpu_data(), bottom[1]->gpu_data(), l2_);
  SetLoss(t.value, t.first_bad, bottom, top);
}

template <typename Dtype>
void HingeLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "labels");
  if (!propagate_down[0]) return;
  hinge_backward(bottom[0]->count(), dim_, bottom[0]->gpu_data(), bottom[1]->gpu_data(), l2_,
                 top[0]->cpu_diff()[0] / num_, bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(HingeLossLayer);

}  // namespace strata
