// Embed on the GPU: a gather (with the bias added) forward; in backward the weight rows gather their gradients
// with atomic adds, or, with gpu_options().deterministic, one thread per output column walking the lookups in
// order (the CPU's summation order, so the same bits, but only num_output threads).
#include <climits>

#include "embed_index.hpp"
#include "strata/cuda.hpp"
#include "strata/layers/embed_layer.hpp"

namespace strata {

namespace {

// y[m][d] = w[index[m]][d] + bias[d]. A lookup that is not an index leaves 0 and lowers *first_bad to its
// position.
template <typename Dtype>
__global__ void embed_forward(long long n, int N, int K, const Dtype* index, const Dtype* w, const Dtype* bias,
                              Dtype* y, unsigned long long* first_bad) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long m = i / N;
    const int d = static_cast<int>(i % N);
    const Dtype v = index[m];
    if (!IsEmbedIndex(v, K)) {
      if (d == 0) atomicMin(first_bad, static_cast<unsigned long long>(m));
      y[i] = 0;
      continue;
    }
    const Dtype x = w[static_cast<long long>(v) * N + d];
    y[i] = bias ? x + bias[d] : x;
  }
}

// dw[index[m]][d] += dy[m][d], one thread per (m, d).
template <typename Dtype>
__global__ void embed_backward_atomic(long long n, int N, const Dtype* index, const Dtype* dy, Dtype* dw) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long m = i / N;
    const int d = static_cast<int>(i % N);
    atomicAdd(dw + static_cast<long long>(index[m]) * N + d, dy[i]);
  }
}

// The same sums, one thread per column d adding the lookups in order.
template <typename Dtype>
__global__ void embed_backward_ordered(int M, int N, const Dtype* index, const Dtype* dy, Dtype* dw) {
  STRATA_KERNEL_LOOP(d, N) {
    for (int m = 0; m < M; ++m) dw[static_cast<long long>(index[m]) * N + d] += dy[static_cast<long long>(m) * N + d];
  }
}

}  // namespace

template <typename Dtype>
void EmbedLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  const long long n = top[0]->count();
  if (n == 0) return;
  auto* first_bad = static_cast<unsigned long long*>(cuda::workspace(sizeof(unsigned long long)));
  STRATA_CUDA_CHECK(cudaMemset(first_bad, 0xFF, sizeof(unsigned long long)));
  embed_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, num_output_, input_dim_, bottom[0]->gpu_data(),
                                                     this->blobs_[0]->gpu_data(),
                                                     bias_term_ ? this->blobs_[1]->gpu_data() : nullptr,
                                                     top[0]->mutable_gpu_data(), first_bad);
  STRATA_CUDA_KERNEL_CHECK();
  unsigned long long bad = ULLONG_MAX;
  STRATA_CUDA_CHECK(cudaMemcpy(&bad, first_bad, sizeof(bad), cudaMemcpyDeviceToHost));
  if (bad != ULLONG_MAX) CheckIndex(bottom[0]->cpu_data()[bad], static_cast<long long>(bad));
}

template <typename Dtype>
void EmbedLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  CheckNoBottomGradient(propagate_down);
  const long long n = top[0]->count();
  if (n == 0) return;
  const Dtype* dy = top[0]->gpu_diff();
  if (this->param_propagate_down(0)) {
    const Dtype* index = bottom[0]->gpu_data();
    Dtype* dw = this->blobs_[0]->mutable_gpu_diff();
    if (gpu_options().deterministic) {
      embed_backward_ordered<<<cuda::blocks(num_output_), cuda::kThreads>>>(lookups_, num_output_, index, dy, dw);
    } else {
      embed_backward_atomic<<<cuda::blocks(n), cuda::kThreads>>>(n, num_output_, index, dy, dw);
    }
    STRATA_CUDA_KERNEL_CHECK();
  }
  if (bias_term_ && this->param_propagate_down(1)) {
    gpu_gemv<Dtype>(CblasTrans, lookups_, num_output_, Dtype(1), dy, bias_multiplier_.gpu_data(), Dtype(1),
                    this->blobs_[1]->mutable_gpu_diff());
  }
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(EmbedLayer);

}  // namespace strata
