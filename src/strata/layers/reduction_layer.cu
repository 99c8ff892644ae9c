#include "strata/cuda.hpp"
#include "strata/layers/reduction_layer.hpp"

#include "row_reduce.cuh"

namespace strata {

namespace {

// y[r] = coeff * (the sum over row r of x, |x| or x^2, by op), the sums in double.
template <typename Dtype>
void reduce_rows(int rows, int dim, ReductionParameter::ReductionOp op, Dtype coeff, const Dtype* x, Dtype* y) {
  row_reduce(
      rows, dim,
      [=] __device__(long long k, int) {
        const double v = static_cast<double>(x[k]);
        const double term = op == ReductionParameter::ASUM ? fabs(v) : op == ReductionParameter::SUMSQ ? v * v : v;
        return make_double2(term, 0.0);
      },
      [=] __device__(int r, double sum, double) { y[r] = coeff * static_cast<Dtype>(sum); });
}

template <typename Dtype>
__global__ void reduction_backward(long long n, int dim, ReductionParameter::ReductionOp op, Dtype coeff,
                                   const Dtype* x, const Dtype* dy, Dtype* dx) {
  STRATA_KERNEL_LOOP(k, n) {
    const Dtype g = coeff * dy[k / dim];
    switch (op) {
      case ReductionParameter::ASUM:
        dx[k] = g * static_cast<Dtype>((Dtype(0) < x[k]) - (x[k] < Dtype(0)));
        break;
      case ReductionParameter::SUMSQ:
        dx[k] = Dtype(2) * g * x[k];
        break;
      default:
        dx[k] = g;
    }
  }
}

}  // namespace

template <typename Dtype>
void ReductionLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  reduce_rows(num_, dim_, op_, coeff_, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
}

template <typename Dtype>
void ReductionLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                         const BlobVec& bottom) {
  const long long n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const Dtype* x = BackwardNeedsBottomData() ? bottom[0]->gpu_data() : nullptr;
  reduction_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, dim_, op_, coeff_, x, top[0]->gpu_diff(),
                                                          bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(ReductionLayer);

}  // namespace strata
