#include "loss_kernels.cuh"
#include "strata/layers/sigmoid_cross_entropy_loss_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
loss::Totals cross_entropy_sum(long long n, const Dtype* x, const Dtype* t, bool has_ignore, int ignore) {
  return loss::gpu_sum_terms(n, [=] __device__(long long k) {
    return loss::is_ignored(t[k], has_ignore, ignore) ? loss::skipped()
                                                       : loss::counted(loss::sigmoid_cross_entropy(x[k], t[k]));
  });
}

// dx = (sigmoid(x) - t) scale, 0 where the target is ignored.
template <typename Dtype>
void cross_entropy_backward(long long n, const Dtype* x, const Dtype* t, bool has_ignore, int ignore, Dtype scale,
                            Dtype* dx) {
  loss::gpu_for_each(n, [=] __device__(long long k) {
    const Dtype s = Dtype(1) / (Dtype(1) + exp(-x[k]));
    dx[k] = loss::is_ignored(t[k], has_ignore, ignore) ? Dtype(0) : (s - t[k]) * scale;
  });
}

}  // namespace

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const loss::Totals totals = cross_entropy_sum(bottom[0]->count(), bottom[0]->gpu_data(), bottom[1]->gpu_data(),
                                                has_ignore_label_, ignore_label_);
  SetLoss(totals.value, totals.counted, top[0]);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                                       const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 1, "targets");
  if (!propagate_down[0]) return;
  const Dtype scale = top[0]->cpu_diff()[0] / normaliser_;
  cross_entropy_backward(bottom[0]->count(), bottom[0]->gpu_data(), bottom[1]->gpu_data(), has_ignore_label_,
                         ignore_label_, scale, bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SigmoidCrossEntropyLossLayer);

}  // namespace strata
