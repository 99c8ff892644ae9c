#include "strata/layers/dropout_layer.hpp"

#include <cmath>

#include "activation_kernels.hpp"
#include "counter_rng.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// Values are drawn in pairs (one 64-bit hash gives two 32-bit numbers), so the mask holds an even count.
int mask_bytes(int count) { return count + (count & 1); }

}  // namespace

template <typename Dtype>
DropoutLayer<Dtype>::DropoutLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {
  mask_.set_memory_category(MemoryCategory::kActivation);
}

template <typename Dtype>
void DropoutLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const float ratio = this->layer_param_.dropout_param().dropout_ratio();
  STRATA_REQUIRE(ratio >= 0 && ratio < 1) << "dropout_param.dropout_ratio must be in [0, 1), got " << ratio;
  scale_ = static_cast<Dtype>(1.0 / (1.0 - static_cast<double>(ratio)));
  keep_below_ = static_cast<uint64_t>(std::llround((1.0 - static_cast<double>(ratio)) * 4294967296.0));
}

template <typename Dtype>
void DropoutLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer<Dtype>::Reshape(bottom, top);
  if (this->phase_ == TRAIN) {
    const int bytes = mask_bytes(bottom[0]->count());
    mask_.Reshape({(bytes + static_cast<int>(sizeof(Dtype)) - 1) / static_cast<int>(sizeof(Dtype))});
  }
}

template <typename Dtype>
void DropoutLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int n = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  if (this->phase_ != TRAIN) {
    cpu_copy(n, x, y);
    return;
  }
  // Bytes may alias any object, so viewing the blob's memory as uint8_t is well defined.
  uint8_t* mask = reinterpret_cast<uint8_t*>(mask_.mutable_cpu_data());
  const uint64_t seed = Strata::draw_seed();
  const uint64_t keep_below = keep_below_;
  const int pairs = mask_bytes(n) / 2;
  const bool parallel = act::use_threads(n);
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
  for (int j = 0; j < pairs; ++j) {
    const uint64_t z = counter_rng::draw(seed, static_cast<uint64_t>(j));
    mask[2 * j] = (z & 0xFFFFFFFFull) < keep_below;
    mask[2 * j + 1] = (z >> 32) < keep_below;
  }
  const Dtype scale = scale_;
#pragma omp parallel for simd schedule(static) if (parallel : parallel)
  for (int i = 0; i < n; ++i) y[i] = x[i] * (Dtype(mask[i]) * scale);
}

template <typename Dtype>
void DropoutLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = top[0]->count();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (this->phase_ != TRAIN) {
    cpu_copy(n, dy, dx);
    return;
  }
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(mask_.cpu_data());
  const Dtype scale = scale_;
#pragma omp parallel for simd schedule(static) if (parallel : act::use_threads(n))
  for (int i = 0; i < n; ++i) dx[i] = dy[i] * (Dtype(mask[i]) * scale);
}

STRATA_INSTANTIATE_CLASS(DropoutLayer);
REGISTER_LAYER_CLASS(Dropout);

}  // namespace strata
