#include "loss_kernels.cuh"
#include "strata/layers/euclidean_loss_layer.hpp"

namespace strata {

namespace {

// sum (a - b)^2
template <typename Dtype>
double squared_distance(long long n, const Dtype* a, const Dtype* b) {
  return loss::gpu_sum_terms(n, [=] __device__(long long k) {
           const double d = static_cast<double>(a[k]) - b[k];
           return loss::counted(d * d);
         }).value;
}

// da = alpha (a - b) and db = -alpha (a - b), each where its pointer is not null.
template <typename Dtype>
void euclidean_backward(long long n, const Dtype* a, const Dtype* b, Dtype alpha, Dtype* da, Dtype* db) {
  loss::gpu_for_each(n, [=] __device__(long long k) {
    const Dtype g = alpha * (a[k] - b[k]);
    if (da) da[k] = g;
    if (db) db[k] = -g;
  });
}

}  // namespace

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const double sum = squared_distance<Dtype>(bottom[0]->count(), bottom[0]->gpu_data(), bottom[1]->gpu_data());
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(sum / bottom[0]->shape(0) / 2);
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  if (!propagate_down[0] && !propagate_down[1]) return;
  const Dtype alpha = top[0]->cpu_diff()[0] / bottom[0]->shape(0);
  euclidean_backward<Dtype>(bottom[0]->count(), bottom[0]->gpu_data(), bottom[1]->gpu_data(), alpha,
                            propagate_down[0] ? bottom[0]->mutable_gpu_diff() : nullptr,
                            propagate_down[1] ? bottom[1]->mutable_gpu_diff() : nullptr);
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(EuclideanLossLayer);

}  // namespace strata
