#include "strata/layers/batch_reindex_layer.hpp"

#include "embed_index.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void BatchReindexLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[1]->num_axes() == 1)
      << "layer '" << this->layer_param_.name() << "': the indices (bottom 1) must be 1-D, got shape "
      << bottom[1]->shape_string();
  STRATA_REQUIRE(bottom[0]->num_axes() >= 1)
      << "layer '" << this->layer_param_.name() << "': bottom 0 needs a batch axis";
  std::vector<int> shape = bottom[0]->shape();
  shape[0] = bottom[1]->shape(0);
  top[0]->Reshape(shape);
  inner_ = bottom[0]->shape(0) > 0 ? bottom[0]->count(1) : 0;
}

template <typename Dtype>
const std::vector<int>& BatchReindexLayer<Dtype>::CheckedIndices(const Blob<Dtype>& permut, int rows) {
  index_.resize(permut.count());
  const Dtype* p = permut.cpu_data();
  for (int k = 0; k < permut.count(); ++k) {
    STRATA_REQUIRE(IsEmbedIndex(p[k], rows))
        << "layer '" << this->layer_param_.name() << "': index " << k << " is " << p[k]
        << ", not an integer in [0, " << rows << ")";
    index_[k] = static_cast<int>(p[k]);
  }
  return index_;
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::GroupByBottomRow(int rows) {
  begin_.assign(rows + 1, 0);
  for (int r : index_) ++begin_[r + 1];
  for (int r = 0; r < rows; ++r) begin_[r + 1] += begin_[r];
  top_rows_.resize(index_.size());
  std::vector<int> next(begin_.begin(), begin_.end() - 1);
  for (size_t k = 0; k < index_.size(); ++k) top_rows_[next[index_[k]]++] = static_cast<int>(k);
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const std::vector<int>& index = CheckedIndices(*bottom[1], bottom[0]->shape(0));
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (size_t k = 0; k < index.size(); ++k) {
    cpu_copy(inner_, x + static_cast<long>(index[k]) * inner_, y + k * inner_);
  }
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                            const BlobVec& bottom) {
  STRATA_REQUIRE(!propagate_down[1]) << "layer '" << this->layer_param_.name()
                                     << "': the indices (bottom 1) take no gradient";
  if (!propagate_down[0]) return;
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), Dtype(0), dx);
  for (size_t k = 0; k < index_.size(); ++k) {
    cpu_axpy(inner_, Dtype(1), dy + k * inner_, dx + static_cast<long>(index_[k]) * inner_);
  }
}

STRATA_INSTANTIATE_CLASS(BatchReindexLayer);
REGISTER_LAYER_CLASS(BatchReindex);

}  // namespace strata
