#include "strata/layers/filter_layer.hpp"

#include <algorithm>

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void FilterLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(top.size() == bottom.size() - 1)
      << this->describe() << " takes the blobs to filter and then the selector, and makes one top per filtered "
      << "blob: " << bottom.size() << " bottoms need " << bottom.size() - 1 << " top(s), got " << top.size();
  first_reshape_ = true;
}

template <typename Dtype>
void FilterLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& selector = *bottom.back();
  STRATA_REQUIRE(selector.num_axes() >= 1) << "the selector (the last bottom) must have shape (N) or (N, 1, ...), "
                                           << "got a scalar";
  for (int a = 1; a < selector.num_axes(); ++a) {
    STRATA_REQUIRE(selector.shape(a) == 1) << "the selector (the last bottom) must have shape (N) or (N, 1, ...): "
                                           << "one value per item; got shape " << selector.shape_string();
  }
  items_ = selector.shape(0);
  for (size_t b = 0; b + 1 < bottom.size(); ++b) {
    STRATA_REQUIRE(bottom[b]->num_axes() >= 1 && bottom[b]->shape(0) == items_)
        << "bottom " << b << " of shape " << bottom[b]->shape_string() << " must have as many items (axis 0) as "
        << "the selector of shape " << selector.shape_string() << ": " << items_;
  }
  const size_t bytes = sizeof(int) * std::max(items_, 1);
  if (!position_ || position_->size() < bytes) {
    position_ = std::make_shared<SyncedMemory>(bytes, MemoryCategory::kWorkspace);
  }
  const Dtype* s = selector.cpu_data();
  int* position = static_cast<int*>(position_->mutable_cpu_data());
  selected_ = 0;
  for (int n = 0; n < items_; ++n) position[n] = s[n] != Dtype(0) ? selected_++ : -1;
  // At set-up the tops keep every item, so that a net is built before any selector value exists (Caffe's).
  const int kept = first_reshape_ ? items_ : selected_;
  first_reshape_ = false;
  for (size_t t = 0; t < top.size(); ++t) {
    std::vector<int> shape = bottom[t]->shape();
    shape[0] = kept;
    top[t]->Reshape(shape);
  }
}

template <typename Dtype>
void FilterLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  RequireSelection();
  const int* position = static_cast<const int*>(position_->cpu_data());
  for (size_t t = 0; t < top.size(); ++t) {
    const int dim = bottom[t]->count(1);
    const Dtype* x = bottom[t]->cpu_data();
    Dtype* y = top[t]->mutable_cpu_data();
    for (int n = 0; n < items_; ++n) {
      if (position[n] >= 0) {
        cpu_copy(dim, x + static_cast<long long>(n) * dim, y + static_cast<long long>(position[n]) * dim);
      }
    }
  }
}

template <typename Dtype>
void FilterLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  RefuseSelectorGradient(propagate_down);
  const int* position = static_cast<const int*>(position_->cpu_data());
  for (size_t t = 0; t < top.size(); ++t) {
    if (!propagate_down[t]) continue;
    const int dim = bottom[t]->count(1);
    const Dtype* dy = selected_ > 0 ? top[t]->cpu_diff() : nullptr;
    Dtype* dx = bottom[t]->mutable_cpu_diff();
    for (int n = 0; n < items_; ++n) {
      Dtype* row = dx + static_cast<long long>(n) * dim;
      if (position[n] >= 0) {
        cpu_copy(dim, dy + static_cast<long long>(position[n]) * dim, row);
      } else {
        cpu_set(dim, Dtype(0), row);
      }
    }
  }
}

STRATA_INSTANTIATE_CLASS(FilterLayer);
REGISTER_LAYER_CLASS(Filter);

}  // namespace strata
