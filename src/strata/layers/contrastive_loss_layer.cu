#include "channel_reduce.cuh"
#include "loss_kernels.cuh"
#include "strata/layers/contrastive_loss_layer.hpp"

namespace strata {

namespace {

// d2[i] = sum over c of (a - b)^2 for each of the N rows of C values, then the loss terms' sum.
template <typename Dtype>
double contrastive_sum(int N, int C, const Dtype* a, const Dtype* b, const Dtype* y, double margin, bool legacy,
                       Dtype* d2) {
  channel_reduce(
      1, N, C,
      [=] __device__(long long k, int) {
        const double d = static_cast<double>(a[k]) - b[k];
        return make_double2(d * d, 0.0);
      },
      [=] __device__(int i, double sum, double) { d2[i] = static_cast<Dtype>(sum); });
  return loss::gpu_sum_terms(N, [=] __device__(long long i) {
           return loss::counted(loss::contrastive_term(d2[i], loss::similar_pair(y[i]), margin, legacy));
         }).value;
}

// da = alpha f (a - b), db = -da (each where its pointer is not null), f the pair's contrastive_factor.
template <typename Dtype>
void contrastive_backward(int N, int C, const Dtype* a, const Dtype* b, const Dtype* y, const Dtype* d2,
                          double margin, bool legacy, double alpha, Dtype* da, Dtype* db) {
  loss::gpu_for_each(static_cast<long long>(N) * C, [=] __device__(long long k) {
    const long long i = k / C;
    const Dtype f = static_cast<Dtype>(alpha * loss::contrastive_factor(d2[i], loss::similar_pair(y[i]), margin,
                                                                        legacy));
    const Dtype g = f * (a[k] - b[k]);
    if (da) da[k] = g;
    if (db) db[k] = -g;
  });
}

}  // namespace

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const auto& p = this->layer_param_.contrastive_loss_param();
  const double sum = contrastive_sum(num_, channels_, bottom[0]->gpu_data(), bottom[1]->gpu_data(),
                                     bottom[2]->gpu_data(), p.margin(), p.legacy_version(),
                                     dist_sq_.mutable_gpu_data());
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(sum / num_ / 2);
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  this->RefuseGradient(propagate_down, 2, "similarity labels");
  if (!propagate_down[0] && !propagate_down[1]) return;
  const auto& p = this->layer_param_.contrastive_loss_param();
  const double alpha = top[0]->cpu_diff()[0] / num_;
  contrastive_backward(num_, channels_, bottom[0]->gpu_data(), bottom[1]->gpu_data(), bottom[2]->gpu_data(),
                       dist_sq_.gpu_data(), p.margin(), p.legacy_version(), alpha,
                       propagate_down[0] ? bottom[0]->mutable_gpu_diff() : nullptr,
                       propagate_down[1] ? bottom[1]->mutable_gpu_diff() : nullptr);
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ContrastiveLossLayer);

}  // namespace strata
