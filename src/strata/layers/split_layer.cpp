#include "strata/layers/split_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void SplitLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (Blob<Dtype>* t : top) {
    STRATA_REQUIRE(t != bottom[0]) << "a Split layer cannot work in place";
    t->ReshapeLike(*bottom[0]);
  }
}

template <typename Dtype>
void SplitLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob<Dtype>* t : top) t->ShareData(*bottom[0]);
}

template <typename Dtype>
void SplitLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int n = bottom[0]->count();
  // In the layout of the data the tops share (the gradients of a blocked one come blocked from its readers).
  const MemoryFormat layout = bottom[0]->data_layout();
  Dtype* bottom_diff = bottom[0]->mutable_cpu_diff_in(layout, false);
  if (top.size() == 1) {
    cpu_copy(n, top[0]->cpu_diff_in(layout), bottom_diff);
    return;
  }
  cpu_add(n, top[0]->cpu_diff_in(layout), top[1]->cpu_diff_in(layout), bottom_diff);
  for (size_t i = 2; i < top.size(); ++i) cpu_axpy(n, Dtype(1), top[i]->cpu_diff_in(layout), bottom_diff);
}

STRATA_INSTANTIATE_CLASS(SplitLayer);
REGISTER_LAYER_CLASS(Split);

}  // namespace strata
