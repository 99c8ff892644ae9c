#include "strata/layers/concat_layer.hpp"

#include <algorithm>

#include "strata/layer_factory.hpp"
#include "strata/memory_format.hpp"

namespace strata {

template <typename Dtype>
void ConcatLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConcatParameter& p = this->layer_param_.concat_param();
  STRATA_REQUIRE(!(p.has_axis() && p.has_concat_dim()))
      << "give concat_param.axis or the legacy concat_dim, not both";
}

template <typename Dtype>
void ConcatLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ConcatParameter& p = this->layer_param_.concat_param();
  const Blob<Dtype>& first = *bottom[0];
  if (p.has_concat_dim()) {
    STRATA_REQUIRE(p.concat_dim() < static_cast<unsigned>(first.num_axes()))
        << "concat_dim " << p.concat_dim() << " out of range for a bottom of shape " << first.shape_string();
    axis_ = static_cast<int>(p.concat_dim());
  } else {
    axis_ = first.CanonicalAxisIndex(p.axis());
  }
  std::vector<int> shape = first.shape();
  for (size_t b = 1; b < bottom.size(); ++b) {
    const Blob<Dtype>& x = *bottom[b];
    bool match = x.num_axes() == first.num_axes();
    for (int j = 0; match && j < x.num_axes(); ++j) match = j == axis_ || x.shape(j) == first.shape(j);
    STRATA_REQUIRE(match) << "bottom " << b << " of shape " << x.shape_string() << " does not fit bottom 0 of shape "
                          << first.shape_string() << ": all dimensions but axis " << axis_ << " must match";
    shape[axis_] += x.shape(axis_);
  }
  top[0]->Reshape(shape);
  blockable_ = bottom.size() > 1 && axis_ == 1 && first.num_axes() == 4;
  for (const Blob<Dtype>* x : bottom) blockable_ = blockable_ && x->shape(1) % kChannelBlock16 == 0;
  outer_ = first.count(0, axis_);
  inner_ = first.count(axis_ + 1);
  if (bottom.size() == 1) {
    top[0]->ShareData(first);
    top[0]->ShareDiff(first);
  }
}

template <typename Dtype>
void ConcatLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;
  // Blocked where a bottom is and the top may be (the plain bottoms are converted in place), else plain.
  const MemoryFormat layout = blockable_ ? this->ElementwiseLayout(bottom, top) : MemoryFormat::kPlain;
  Dtype* y = top[0]->mutable_cpu_data_in(layout, false);
  const int top_width = top[0]->shape(axis_) * inner_;
  int offset = 0;
  for (Blob<Dtype>* x : bottom) {
    const int width = x->shape(axis_) * inner_;
    cpu_copy_rows(outer_, width, x->cpu_data_in(layout), width, y + offset, top_width);
    offset += width;
  }
}

template <typename Dtype>
void ConcatLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (bottom.size() == 1) return;
  // The bottoms' gradients in the layout of the top's.
  const MemoryFormat layout = blockable_ ? top[0]->diff_layout() : MemoryFormat::kPlain;
  const Dtype* dy = top[0]->cpu_diff_in(layout);
  const int top_width = top[0]->shape(axis_) * inner_;
  int offset = 0;
  for (size_t b = 0; b < bottom.size(); ++b) {
    const int width = bottom[b]->shape(axis_) * inner_;
    if (propagate_down[b]) {
      cpu_copy_rows(outer_, width, dy + offset, top_width, bottom[b]->mutable_cpu_diff_in(layout, false), width);
    }
    offset += width;
  }
}

STRATA_INSTANTIATE_CLASS(ConcatLayer);
REGISTER_LAYER_CLASS(Concat);

}  // namespace strata
