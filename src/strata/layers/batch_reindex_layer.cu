#include <algorithm>

#include "strata/cuda.hpp"
#include "strata/layers/batch_reindex_layer.hpp"

namespace strata {

namespace {

// One thread per top value: row k copies bottom row index[k].
template <typename Dtype>
__global__ void reindex_forward(long long n, int inner, const Dtype* x, const int* index, Dtype* y) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long k = i / inner;
    y[i] = x[static_cast<long long>(index[k]) * inner + i % inner];
  }
}

// One thread per bottom value: the gradients of the top rows that copied its row, in ascending top order (the
// CPU's order), from the grouping begin[r] .. begin[r + 1] of top_rows.
template <typename Dtype>
__global__ void reindex_backward(long long n, int inner, const Dtype* dy, const int* begin, const int* top_rows,
                                 Dtype* dx) {
  STRATA_KERNEL_LOOP(i, n) {
    const long long r = i / inner, j = i % inner;
    Dtype g = 0;
    for (int t = begin[r]; t < begin[r + 1]; ++t) g += dy[static_cast<long long>(top_rows[t]) * inner + j];
    dx[i] = g;
  }
}

}  // namespace

template <typename Dtype>
void BatchReindexLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  // The indices are checked on the host (a few values per batch), then used from the groups_ blob.
  const std::vector<int>& index = CheckedIndices(*bottom[1], bottom[0]->shape(0));
  GroupByBottomRow(bottom[0]->shape(0));
  groups_.Reshape({static_cast<int>(index.size() + begin_.size() + top_rows_.size())});
  int* g = reinterpret_cast<int*>(groups_.mutable_cpu_data());  // ints, no wider than Dtype
  std::copy(index.begin(), index.end(), g);
  std::copy(begin_.begin(), begin_.end(), g + index.size());
  std::copy(top_rows_.begin(), top_rows_.end(), g + index.size() + begin_.size());
  const long long n = top[0]->count();
  if (n == 0) return;
  reindex_forward<<<cuda::blocks(n), cuda::kThreads>>>(n, inner_, bottom[0]->gpu_data(),
                                                       reinterpret_cast<const int*>(groups_.gpu_data()),
                                                       top[0]->mutable_gpu_data());
  STRATA_CUDA_KERNEL_CHECK();
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[1]) << "layer '" << this->layer_param_.name()
                                     << "': the indices (bottom 1) take no gradient";
  if (!propagate_down[0]) return;
  const long long n = bottom[0]->count();
  if (n == 0) return;
  const int* g = reinterpret_cast<const int*>(groups_.gpu_data());
  reindex_backward<<<cuda::blocks(n), cuda::kThreads>>>(n, inner_, top[0]->gpu_diff(), g + index_.size(),
                                                        g + index_.size() + begin_.size(),
                                                        bottom[0]->mutable_gpu_diff());
  STRATA_CUDA_KERNEL_CHECK();
}

STRATA_INSTANTIATE_LAYER_GPU_FUNCS(BatchReindexLayer);

}  // namespace strata
