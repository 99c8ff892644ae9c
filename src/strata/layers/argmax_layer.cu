#include "strata/cuda.hpp"
#include "strata/layers/argmax_layer.hpp"

namespace strata {

namespace {

// Caffe's order, std::greater on (value, index) pairs: (va, ia) comes before (vb, ib) when va > vb, or when the
// values tie and ia > ib.
template <typename Dtype>
__device__ bool precedes(Dtype va, int ia, Dtype vb, int ib) {
  return vb < va || (!(va < vb) && ib < ia);
}

// What Forward_cpu computes, in the same terms: search i reads dim values stride apart; `pairs` is the
// no-axis out_max_val layout (N, 2, top_k), indices then values.
struct Search {
  int dim, stride, top_k;
  bool values, pairs;
};

template <typename Dtype>
__device__ const Dtype* search_input(const Search& s, long long i, const Dtype* x) {
  return x + (i / s.stride) * s.dim * s.stride + i % s.stride;
}

template <typename Dtype>
__device__ void write_result(const Search& s, long long i, int j, Dtype value, int index, Dtype* y) {
  if (s.pairs) {
    y[2 * i * s.top_k + j] = static_cast<Dtype>(index);
    y[2 * i * s.top_k + s.top_k + j] = value;
    return;
  }
  y[((i / s.stride) * s.top_k + j) * s.stride + i % s.stride] = s.values ? value : static_cast<Dtype>(index);
}

// Folds candidate (v, c) into the best so far (bv, bi; bi < 0 for none), among the values that come after the
// previous round's result (pv, pi; pi < 0 in the first round).
template <typename Dtype>
__device__ void consider(Dtype v, int c, Dtype pv, int pi, Dtype& bv, int& bi) {
  if (pi >= 0 && !precedes(pv, pi, v, c)) return;
  if (bi < 0 || precedes(v, c, bv, bi)) {
    bv = v;
    bi = c;
  }
}

// Many searches: one thread each, top_k rounds of a scan for the best value after the previous round's.
// Neighbouring threads read neighbouring positions when stride > 1 (coalesced).
template <typename Dtype>
__global__ void argmax_per_thread(long long searches, Search s, const Dtype* x, Dtype* y) {
  STRATA_KERNEL_LOOP(i, searches) {
    const Dtype* in = search_input(s, i, x);
    Dtype pv = 0;
    int pi = -1;
    for (int j = 0; j < s.top_k; ++j) {
      Dtype bv = 0;
      int bi = -1;
      for (int c = 0; c < s.dim; ++c) consider(in[static_cast<long long>(c) * s.stride], c, pv, pi, bv, bi);
      write_result(s, i, j, bv, bi, y);
      pv = bv;
      pi = bi;
    }
  }
}

// Folds the (value, index) candidates of a warp's lanes into lane 0.
template <typename Dtype>
__device__ void warp_best(Dtype& bv, int& bi) {
  for (int o = 16; o > 0; o /= 2) {
    const Dtype ov = __shfl_down_sync(0xffffffffu, bv, o);
    const int oi = __shfl_down_sync(0xffffffffu, bi, o);
    if (oi >= 0 && (bi < 0 || precedes(ov, oi, bv, bi))) {
      bv = ov;
      bi = oi;
    }
  }
}

// Few or long searches: one block each; every round the threads scan a share of the values and the block
// combines their candidates (shuffles within warps, then across warps in shared memory).
template <typename Dtype>
__global__ void argmax_per_block(Search s, const Dtype* x, Dtype* y) {
  constexpr int kWarps = cuda::kThreads / 32;
  __shared__ Dtype shared_v[kWarps];
  __shared__ int shared_i[kWarps];
  const long long i = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Dtype* in = search_input(s, i, x);
  Dtype pv = 0;
  int pi = -1;
  for (int j = 0; j < s.top_k; ++j) {
    Dtype bv = 0;
    int bi = -1;
    for (int c = threadIdx.x; c < s.dim; c += blockDim.x) {
      consider(in[static_cast<long long>(c) * s.stride], c, pv, pi, bv, bi);
    }
    warp_best(bv, bi);
    if (lane == 0) {
      shared_v[warp] = bv;
      shared_i[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
      bv = lane < kWarps ? shared_v[lane] : Dtype(0);
      bi = lane < kWarps ? shared_i[lane] : -1;
      warp_best(bv, bi);
      if (lane == 0) {
        write_result(s, i, j, bv, bi, y);
        shared_v[0] = bv;
        shared_i[0] = bi;
      }
    }
    __syncthreads();
    pv = shared_v[0];
    pi = shared_i[0];
    __syncthreads();  // everyone has the result before the next round's writes to shared memory
  }
}

}  // namespace

template <typename Dtype>
void ArgMaxLayer<Dtype>::Forward_gpu(const BlobVec& bottom, const BlobVec& top) {
  if (searches_ == 0) return;
  const ArgMaxParameter& p = this->layer_param_.argmax_param();
  const Search s{dim_, stride_, top_k_, p.out_max_val(), p.out_max_val() && !p.has_axis()};
  const Dtype* x = bottom[0]->gpu_data();
  Dtype* y = top[0]->mutable_gpu_data();
  // A thread per search leaves the GPU idle when there are few searches, and is slow on long ones.
  if (searches_ <= 1024 || dim_ >= 1024) {
    argmax_per_block<<<searches_, cuda::kThreads>>>(s, x, y);
  } else {
    argmax_per_thread<<<cuda::blocks(searches_), cuda::kThreads>>>(static_cast<long long>(searches_), s, x, y);
  }
  STRATA_CUDA_KERNEL_CHECK();
}

template void ArgMaxLayer<float>::Forward_gpu(const std::vector<Blob<float>*>&, const std::vector<Blob<float>*>&);
template void ArgMaxLayer<double>::Forward_gpu(const std::vector<Blob<double>*>&, const std::vector<Blob<double>*>&);

}  // namespace strata
