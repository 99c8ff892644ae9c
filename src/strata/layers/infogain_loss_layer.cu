#include "loss_kernels.cuh"
#include "strata/layers/infogain_loss_layer.hpp"

namespace strata {

namespace {

template <typename Dtype>
loss::Totals infogain_sum(long long positions, const Dtype* p, const Dtype* labels, const Dtype* H, int C, int inner,
                          bool has_ignore, int ignore) {
  return loss::gpu_sum_terms(positions, [=] __device__(long long k) {
    return loss::infogain_term(k, p, labels, H, C, inner, has_ignore, ignore);
  });
}

// row_sums[r] = sum_c H[r, c] (in double, as on the CPU), then dx = infogain_grad * scale.
template <typename Dtype>
void infogain_backward(long long n, const Dtype* p, const Dtype* labels, const Dtype* H, int C, int inner,
                       bool has_ignore, int ignore, Dtype scale, Dtype* row_sums, Dtype* dx) {
  loss::gpu_for_each(C, [=] __device__(long long r) {
    double s = 0;
    for (int c = 0; c < C; ++c) s += H[r * C + c];
    row_sums[r] = static_cast<Dtype>(s);
  });
  loss::gpu_for_each(n, [=] __device__(long long j) {
    dx[j] = loss::infogain_grad(j, p, labels, H, row_sums, C, inner, has_ignore, ignore) * scale;
  });
}

}  // namespace

template <typename Dtype>
void InfogainLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_->Forward({bottom[0]}, {probs_});
  const loss::Totals t =
      infogain_sum(static_cast<long long>(outer_) * inner_, probs_->gpu_data(), bottom[1]->gpu_data(),
                   Infogain(bottom).gpu_data(), channels_, inner_, has_ignore_label_, ignore_label_);
  SetLoss(t.value, t.counted, t.first_bad, bottom, top);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  RefuseGradients(propagate_down);
  if (!propagate_down[0]) return;
  infogain_backward(bottom[0]->count(), probs_->gpu_data(), bottom[1]->gpu_data(), Infogain(bottom).gpu_data(),
                    channels_, inner_, has_ignore_label_, ignore_label_, top[0]->cpu_diff()[0] / normaliser_,
                    row_sums_.mutable_gpu_data(), bottom[0]->mutable_gpu_diff());
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(InfogainLossLayer);

}  // namespace strata
