#include "strata/layers/scale_layer.hpp"

#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void ScaleLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ScaleParameter& p = this->layer_param_.scale_param();
  const bool learned_scale = bottom.size() == 1;
  const size_t num_blobs = (learned_scale ? 1 : 0) + (p.bias_term() ? 1 : 0);
  if (!this->blobs_.empty()) {
    // Parameters came with the layer (a caffemodel); Reshape checks their shapes.
    STRATA_REQUIRE(this->blobs_.size() == num_blobs)
        << "expected " << num_blobs << " parameter blob(s) (" << (learned_scale ? "scale" : "")
        << (learned_scale && p.bias_term() ? ", " : "") << (p.bias_term() ? "bias" : "") << "), got "
        << this->blobs_.size();
  } else {
    // The bias has the scale's shape; with two bottoms that is bottom[1]'s placement in bottom[0].
    const std::vector<int> shape =
        BroadcastParamShape(*bottom[0], p.axis(), learned_scale ? p.num_axes() : bottom[1]->num_axes());
    if (learned_scale) {
      this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
      FillerParameter filler = p.filler();
      if (!p.has_filler()) {
        // Unit scale: the layer starts as the identity.
        filler.set_type("constant");
        filler.set_value(1);
      }
      GetFiller<Dtype>(filler)->Fill(this->blobs_.back().get());
    }
    if (p.bias_term()) {
      this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
      GetFiller<Dtype>(p.bias_filler())->Fill(this->blobs_.back().get());
    }
  }
  bias_param_id_ = p.bias_term() ? static_cast<int>(this->blobs_.size()) - 1 : -1;
  this->param_propagate_down_.assign(this->blobs_.size(), true);
  input_copy_.set_memory_category(MemoryCategory::kActivation);
}

template <typename Dtype>
void ScaleLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ScaleParameter& p = this->layer_param_.scale_param();
  geom_ = BroadcastGeometryOf(*bottom[0], scale(bottom), p.axis(), "scale");
  if (bias_param_id_ >= 0) {
    const Blob<Dtype>& bias = *this->blobs_[bias_param_id_];
    STRATA_REQUIRE(bias.count() == geom_.dim)
        << "the bias has shape " << bias.shape_string() << " but the scale " << scale(bottom).shape_string();
  }
  const Blob<Dtype>& x = *bottom[0];
  per_channel_ = bottom.size() == 1 && x.num_axes() == 4 && geom_.outer == x.shape(0) && geom_.dim == x.shape(1) &&
                 geom_.inner == x.count(2);
  if (top[0] == bottom[0]) {
    input_copy_.ReshapeLike(*bottom[0]);
  } else {
    top[0]->ReshapeLike(*bottom[0]);
  }
}

template <typename Dtype>
void ScaleLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  layout_ = per_channel_ ? this->ElementwiseLayout(bottom, top) : MemoryFormat::kPlain;
  const Dtype* x = bottom[0]->cpu_data_in(layout_);
  // In place, the scale's gradient needs the input that the output overwrites (kept in the same layout).
  input_copied_ = top[0] == bottom[0] && (bottom.size() > 1 || this->param_propagate_down(0));
  if (input_copied_) cpu_copy(bottom[0]->count(), x, input_copy_.mutable_cpu_data());
  const Dtype* bias = bias_param_id_ >= 0 ? this->blobs_[bias_param_id_]->cpu_data() : nullptr;
  broadcast_affine<Dtype>(geom_, x, scale(bottom).cpu_data(), bias,
                          top[0]->mutable_cpu_data_in(layout_, top[0] == bottom[0]), layout_);
}

template <typename Dtype>
void ScaleLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  // Parameter gradients first: in place, writing the bottom's diff overwrites the top's. All in the forward's
  // layout.
  const Dtype* dy = top[0]->cpu_diff_in(layout_);
  if (bias_param_id_ >= 0 && this->param_propagate_down(bias_param_id_)) {
    broadcast_reduce<Dtype>(geom_, dy, nullptr, true, this->blobs_[bias_param_id_]->mutable_cpu_diff(), layout_);
  }
  const bool scale_is_bottom = bottom.size() > 1;
  if (scale_is_bottom ? propagate_down[1] : this->param_propagate_down(0)) {
    const bool in_place = top[0] == bottom[0];
    CHECK(!in_place || input_copied_) << "in-place Scale: the forward pass kept no copy of the input";
    const Dtype* x = in_place ? input_copy_.cpu_data() : bottom[0]->cpu_data_in(layout_);
    // A parameter's gradient accumulates; a bottom's is written.
    Dtype* ds = scale_is_bottom ? bottom[1]->mutable_cpu_diff() : this->blobs_[0]->mutable_cpu_diff();
    broadcast_reduce<Dtype>(geom_, x, dy, !scale_is_bottom, ds, layout_);
  }
  if (propagate_down[0]) {
    broadcast_affine<Dtype>(geom_, dy, scale(bottom).cpu_data(), nullptr,
                            bottom[0]->mutable_cpu_diff_in(layout_, top[0] == bottom[0]), layout_);
  }
}

STRATA_INSTANTIATE_CLASS(ScaleLayer);
REGISTER_LAYER_CLASS(Scale);

}  // namespace strata
