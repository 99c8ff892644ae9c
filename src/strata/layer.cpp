#include "strata/layer.hpp"

#include <type_traits>

#include "strata/device.hpp"

namespace strata {

template <typename Dtype>
Layer<Dtype>::Layer(const LayerParameter& param) : layer_param_(param), phase_(param.phase()) {
  if (layer_param_.blobs_size() > 0) {
    blobs_.resize(layer_param_.blobs_size());
    for (int i = 0; i < layer_param_.blobs_size(); ++i) {
      blobs_[i] = std::make_shared<Blob<Dtype>>();
      blobs_[i]->FromProto(layer_param_.blobs(i));
    }
  }
}

template <typename Dtype>
std::string Layer<Dtype>::describe() const {
  return "layer '" + layer_param_.name() + "' (" + layer_param_.type() + ")";
}

template <typename Dtype>
void Layer<Dtype>::SetUp(const BlobVec& bottom, const BlobVec& top) {
  CheckBlobCounts(bottom, top);
  LayerSetUp(bottom, top);
  Reshape(bottom, top);
  SetLossWeights(top);
}

template <typename Dtype>
Dtype Layer<Dtype>::Forward(const BlobVec& bottom, const BlobVec& top) {
  Dtype total = 0;
  Reshape(bottom, top);
  if (absorbed_) return total;  // the layer before it computed it (Absorb); an absorbed layer has no loss
  if (Strata::mode() == Strata::GPU) {
    Forward_gpu(bottom, top);
  } else {
    Forward_cpu(bottom, top);
  }
  for (size_t t = 0; t < top.size(); ++t) {
    if (loss(static_cast<int>(t)) == Dtype(0)) continue;
    // A loss top's diff holds its loss weight times the loss scale (SetLossWeights, set_loss_scale), so the
    // weighted loss is a dot product, divided by the scale.
    const int count = top[t]->count();
    total += cpu_dot(count, top[t]->cpu_data(), top[t]->cpu_diff()) / loss_scale_;
  }
  return total;
}

template <typename Dtype>
void Layer<Dtype>::Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) {
  if (backward_absorbed_) return;
  if (Strata::mode() == Strata::GPU) {
    Backward_gpu(top, propagate_down, bottom);
  } else {
    Backward_cpu(top, propagate_down, bottom);
  }
}

template <typename Dtype>
void Layer<Dtype>::ToProto(LayerParameter* param, bool write_diff) {
  param->Clear();
  param->CopyFrom(layer_param_);
  param->clear_blobs();
  for (auto& blob : blobs_) blob->ToProto(param->add_blobs(), write_diff);
}

template <typename Dtype>
void Layer<Dtype>::set_loss(int top_index, Dtype value) {
  if (loss_.size() <= static_cast<size_t>(top_index)) loss_.resize(top_index + 1, Dtype(0));
  loss_[top_index] = value;
}

template <typename Dtype>
void Layer<Dtype>::set_param_propagate_down(int param_id, bool value) {
  if (param_propagate_down_.size() <= static_cast<size_t>(param_id)) {
    param_propagate_down_.resize(param_id + 1, true);
  }
  param_propagate_down_[param_id] = value;
}

template <typename Dtype>
void Layer<Dtype>::set_data_shard(const DataShard& shard) {
  STRATA_REQUIRE(shard.count > 0 && shard.index >= 0 && shard.index < shard.count)
      << "bad data shard: " << shard.index << " of " << shard.count;
  data_shard_ = shard;
}

template <typename Dtype>
void Layer<Dtype>::CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const {
  const int nb = static_cast<int>(bottom.size());
  const int nt = static_cast<int>(top.size());
  if (ExactNumBottomBlobs() >= 0) {
    STRATA_REQUIRE(nb == ExactNumBottomBlobs())
        << describe() << " takes " << ExactNumBottomBlobs() << " bottom blob(s), got " << nb;
  }
  if (MinBottomBlobs() >= 0) {
    STRATA_REQUIRE(nb >= MinBottomBlobs())
        << describe() << " takes at least " << MinBottomBlobs() << " bottom blob(s), got " << nb;
  }
  if (MaxBottomBlobs() >= 0) {
    STRATA_REQUIRE(nb <= MaxBottomBlobs())
        << describe() << " takes at most " << MaxBottomBlobs() << " bottom blob(s), got " << nb;
  }
  if (ExactNumTopBlobs() >= 0) {
    STRATA_REQUIRE(nt == ExactNumTopBlobs())
        << describe() << " produces " << ExactNumTopBlobs() << " top blob(s), got " << nt;
  }
  if (MinTopBlobs() >= 0) {
    STRATA_REQUIRE(nt >= MinTopBlobs())
        << describe() << " produces at least " << MinTopBlobs() << " top blob(s), got " << nt;
  }
  if (MaxTopBlobs() >= 0) {
    STRATA_REQUIRE(nt <= MaxTopBlobs())
        << describe() << " produces at most " << MaxTopBlobs() << " top blob(s), got " << nt;
  }
  if (EqualNumBottomTopBlobs()) {
    STRATA_REQUIRE(nb == nt) << describe() << " needs as many top blobs as bottom blobs, got " << nb
                             << " bottom(s) and " << nt << " top(s)";
  }
}

template <typename Dtype>
void Layer<Dtype>::SetLossWeights(const BlobVec& top) {
  const int num_loss_weights = layer_param_.loss_weight_size();
  if (num_loss_weights == 0) return;
  STRATA_REQUIRE(num_loss_weights == static_cast<int>(top.size()))
      << describe() << ": loss_weight must be given once per top blob (" << top.size() << "), got "
      << num_loss_weights;
  for (int t = 0; t < static_cast<int>(top.size()); ++t) {
    const Dtype w = layer_param_.loss_weight(t);
    if (w == Dtype(0)) continue;
    set_loss(t, w);
    cpu_set(top[t]->count(), w * loss_scale_, top[t]->mutable_cpu_diff());
  }
}

template <typename Dtype>
void Layer<Dtype>::set_loss_scale(Dtype scale, const BlobVec& top) {
  loss_scale_ = scale;
  for (size_t t = 0; t < top.size() && t < loss_.size(); ++t) {
    if (loss_[t] != Dtype(0)) cpu_set(top[t]->count(), loss_[t] * scale, top[t]->mutable_cpu_diff());
  }
}

template <typename Dtype>
ElementType Layer<Dtype>::GpuPrecision() const {
  if (!std::is_same<Dtype, float>::value || Strata::mode() != Strata::GPU) return ElementType::kOwn;
  if (layer_param_.precision() == BF16 && gpu_has_bf16()) return ElementType::kBf16;
  if (layer_param_.precision() == FP16 && gpu_has_fp16()) return ElementType::kFp16;
  return ElementType::kOwn;
}

STRATA_INSTANTIATE_CLASS(Layer);

}  // namespace strata
