#include "strata/layers/im2col_layer.hpp"

#include "conv_window_param.hpp"
#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void Im2colLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  conv_window::Read(this->layer_param_.convolution_param(), *bottom[0], "Im2col", &channel_axis_, &geom_);
  geom_.channels = bottom[0]->shape(channel_axis_);
}

template <typename Dtype>
void Im2colLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob<Dtype>& x = *bottom[0];
  STRATA_REQUIRE(x.num_axes() == channel_axis_ + 3)
      << "Im2col: input of shape " << x.shape_string() << " no longer has 2 spatial axes";
  geom_.channels = x.shape(channel_axis_);
  geom_.height = x.shape(channel_axis_ + 1);
  geom_.width = x.shape(channel_axis_ + 2);
  STRATA_REQUIRE(geom_.height + 2 * geom_.pad_h >= geom_.dilation_h * (geom_.kernel_h - 1) + 1 &&
                 geom_.width + 2 * geom_.pad_w >= geom_.dilation_w * (geom_.kernel_w - 1) + 1)
      << "Im2col: the " << geom_.kernel_h << " x " << geom_.kernel_w << " kernel (dilation " << geom_.dilation_h
      << " x " << geom_.dilation_w << ") is larger than the padded " << geom_.height << " x " << geom_.width
      << " input";
  num_ = x.count(0, channel_axis_);
  std::vector<int> top_shape = x.shape();
  top_shape[channel_axis_] = geom_.col_rows();
  top_shape[channel_axis_ + 1] = geom_.out_h();
  top_shape[channel_axis_ + 2] = geom_.out_w();
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
void Im2colLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const long bottom_dim = bottom[0]->count(channel_axis_), top_dim = top[0]->count(channel_axis_);
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n) im2col_cpu(x + n * bottom_dim, geom_, y + n * top_dim);
}

template <typename Dtype>
void Im2colLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const long bottom_dim = bottom[0]->count(channel_axis_), top_dim = top[0]->count(channel_axis_);
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) col2im_cpu(dy + n * top_dim, geom_, dx + n * bottom_dim);
}

STRATA_INSTANTIATE_CLASS(Im2colLayer);
REGISTER_LAYER_CLASS(Im2col);

}  // namespace strata
