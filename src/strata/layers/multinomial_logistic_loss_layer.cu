#include "loss_kernels.cuh"
#include "strata/layers/multinomial_logistic_loss_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
loss::Totals logistic_sum(int N, int K, const Dtype* p, const Dtype* labels) {
  return loss::gpu_sum_terms(N, [=] __device__(long long i) { return loss::logistic_term(i, p, labels, K); });
}

template <typename Dtype>
void logistic_backward(long long n, int K, const Dtype* p, const Dtype* labels, Dtype scale, Dtype* dp) {
  loss::gpu_for_each(n, [=] __device__(long long k) { dp[k] = loss::logistic_grad(k, p, labels, K) * scale; });
}

}  // namespace

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const loss::Totals t = logistic_sum(num_, dim_, bottom[0]->gpu_data(), bottom[1]->gpu_data());
  SetLoss(t.value, t.first_bad, bottom, top);
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                       const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "labels");
  if (!propagate_down[0]) return;
  logistic_backward(bottom[0]->count(), dim_, bottom[0]->gpu_data(), bottom[1]->gpu_data(),
                    -top[0]->cpu_diff()[0] / num_, bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(MultinomialLogisticLossLayer);

}  // namespace strata
