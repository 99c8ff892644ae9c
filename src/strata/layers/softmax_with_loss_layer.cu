#include <cfloat>
#include <climits>

#include "strata/cuda.hpp"
#include "label_error.hpp"
#include "strata/layers/softmax_with_loss_layer.hpp"

namespace strata {

namespace {

// activation_kernels.hpp's class_of, on the device: a class index, -1 (ignored) or -2 (not a label).
template <typename Dtype>
__device__ inline int class_of(Dtype v, int classes, bool has_ignore, int ignore) {
  if (!(v > Dtype(INT_MIN) && v < Dtype(INT_MAX))) return -2;
  const int l = static_cast<int>(v);
  if (has_ignore && l == ignore) return -1;
  return (l >= 0 && l < classes) ? l : -2;
}

// Per position: its loss and whether it counts (both >= 0, so their sums are cuBLAS asums); the first bad
// label's position goes to *first_bad.
template <typename Dtype>
__global__ void loss_forward(long long positions, int C, int inner, const Dtype* p, const Dtype* labels,
                             bool has_ignore, int ignore, Dtype* loss, Dtype* counted, long long* first_bad) {
  STRATA_KERNEL_LOOP(k, positions) {
    const int l = class_of(labels[k], C, has_ignore, ignore);
    loss[k] = 0;
    counted[k] = 0;
    if (l == -2) {
      atomicMin(reinterpret_cast<unsigned long long*>(first_bad), static_cast<unsigned long long>(k));
    } else if (l >= 0) {
      const long long o = k / inner, i = k % inner;
      loss[k] = -log(max(p[(o * C + l) * inner + i], Dtype(FLT_MIN)));
      counted[k] = 1;
    }
  }
}

template <typename Dtype>
__global__ void count_valid(long long positions, int C, const Dtype* labels, bool has_ignore, int ignore,
                            Dtype* counted) {
  STRATA_KERNEL_LOOP(k, positions) counted[k] = class_of(labels[k], C, has_ignore, ignore) >= 0 ? 1 : 0;
}

// dx = p * scale, the label's entry (p - 1) * scale, nothing for an ignored position.
template <typename Dtype>
__global__ void loss_backward(long long n, int C, int inner, const Dtype* p, const Dtype* labels, bool has_ignore,
                              int ignore, Dtype scale, Dtype* dx) {
  STRATA_KERNEL_LOOP(j, n) {
    const long long i = j % inner;
    const long long c = (j / inner) % C;
    const long long o = j / (static_cast<long long>(inner) * C);
    const int l = class_of(labels[o * inner + i], C, has_ignore, ignore);
    dx[j] = l < 0 ? Dtype(0) : (c == l ? p[j] - Dtype(1) : p[j]) * scale;
  }
}

}  // namespace

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_->Forward({bottom[0]}, {probs_});
  const long long positions = static_cast<long long>(outer_) * inner_;
  Dtype loss = 0, valid = 0;
  if (positions > 0) {
    // Scratch: per-position loss and count, then the first bad position.
    char* scratch = static_cast<char*>(cuda::workspace(2 * positions * sizeof(Dtype) + sizeof(long long) + 16));
    Dtype* losses = reinterpret_cast<Dtype*>(scratch);
    Dtype* counted = losses + positions;
    long long* first_bad = reinterpret_cast<long long*>(scratch + ((2 * positions * sizeof(Dtype) + 15) / 16) * 16);
    const long long none = LLONG_MAX;
    STRATA_CUDA_CHECK(cudaMemcpy(first_bad, &none, sizeof none, cudaMemcpyHostToDevice));
    loss_forward<<<cuda::blocks(positions), cuda::kThreads>>>(positions, channels_, inner_, probs_->gpu_data(),
                                                              bottom[1]->gpu_data(), has_ignore_label_,
                                                              ignore_label_, losses, counted, first_bad);
    STRATA_CUDA_KERNEL_CHECK();
    long long bad = none;
    STRATA_CUDA_CHECK(cudaMemcpy(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost));
    STRATA_REQUIRE(bad == none) << BadLabelMessage(this->describe(), bottom[1]->cpu_data()[bad], bad, inner_,
                                                  channels_, has_ignore_label_, ignore_label_);
    loss = gpu_asum(static_cast<int>(positions), losses);
    valid = gpu_asum(static_cast<int>(positions), counted);
  }
  top[0]->mutable_cpu_data()[0] = loss / Normaliser(static_cast<long long>(valid + Dtype(0.5)));
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[1]) << "SoftmaxWithLoss cannot backpropagate to its labels (bottom 1)";
  if (!propagate_down[0]) return;
  const long long positions = static_cast<long long>(outer_) * inner_;
  if (positions == 0 || channels_ == 0) return;
  Dtype* counted = static_cast<Dtype*>(cuda::workspace(positions * sizeof(Dtype)));
  count_valid<<<cuda::blocks(positions), cuda::kThreads>>>(positions, channels_, bottom[1]->gpu_data(),
                                                           has_ignore_label_, ignore_label_, counted);
  STRATA_CUDA_KERNEL_CHECK();
  const Dtype valid = gpu_asum(static_cast<int>(positions), counted);
  const Dtype scale = top[0]->cpu_diff()[0] / Normaliser(static_cast<long long>(valid + Dtype(0.5)));
  const long long n = probs_->count();
  loss_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, channels_, inner_, probs_->gpu_data(),
                                                     bottom[1]->gpu_data(), has_ignore_label_, ignore_label_, scale,
                                                     bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(SoftmaxWithLossLayer);

}  // namespace strata
