#include "strata/layers/deconvolution_layer.hpp"

#include <type_traits>

#include "conv_window_param.hpp"
#include "cpu_engine.hpp"
#include "onednn_convolution.hpp"
#include "strata/device.hpp"
#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"
#include "weight_and_bias.hpp"

namespace strata {

template <typename Dtype>
void DeconvolutionLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& p = this->layer_param_.convolution_param();
  conv_window::Read(p, *bottom[0], "Deconvolution", &channel_axis_, &geom_);
  channels_ = bottom[0]->shape(channel_axis_);
  num_output_ = static_cast<int>(p.num_output());
  group_ = static_cast<int>(p.group());
  bias_term_ = p.bias_term();
  STRATA_REQUIRE(num_output_ > 0) << "Deconvolution: convolution_param.num_output must be positive";
  STRATA_REQUIRE(group_ > 0) << "Deconvolution: convolution_param.group must be positive";
  STRATA_REQUIRE(channels_ > 0) << "Deconvolution: the input (shape " << bottom[0]->shape_string()
                                << ") has 0 channels";
  STRATA_REQUIRE(channels_ % group_ == 0)
      << "Deconvolution: the input's " << channels_ << " channels do not divide into " << group_ << " groups";
  STRATA_REQUIRE(num_output_ % group_ == 0)
      << "Deconvolution: num_output " << num_output_ << " does not divide into " << group_ << " groups";
  geom_.channels = num_output_;

  // Caffe's layout: the weights of the convolution from num_output channels back to the input's channels.
  const std::vector<int> weight_shape{channels_, num_output_ / group_, geom_.kernel_h, geom_.kernel_w};
  SetUpWeightAndBias(&this->blobs_, weight_shape, bias_term_, num_output_, p.weight_filler(), p.bias_filler());
  this->param_propagate_down_.assign(this->blobs_.size(), true);

  // As Convolution: bfloat16 is oneDNN's, so DEFAULT then means oneDNN; CAFFE (and a double net) compute in float.
  bf16_ = std::is_same<Dtype, float>::value && this->layer_param_.precision() == BF16;
  onednn_ = MakeOneDnnEngine<onednn_conv::Convolution, Dtype>(p, "Deconvolution", this->layer_param_.name(), bf16_);
}

template <typename Dtype>
bool DeconvolutionLayer<Dtype>::AcceptsBlockedBottoms() const {
  return onednn_ != nullptr;
}

template <typename Dtype>
typename Layer<Dtype>::GpuOrder DeconvolutionLayer<Dtype>::GpuActivationOrder() const {
  const bool last = std::is_same<Dtype, float>::value && Strata::mode() == Strata::GPU &&
                    gpu_options().channels_last_for(ComputesIn16Bit());
  return last ? Layer<Dtype>::GpuOrder::kMakesChannelsLast : Layer<Dtype>::GpuOrder::kChannelsFirst;
}

template <typename Dtype>
bool DeconvolutionLayer<Dtype>::ComputesIn16Bit() const {
#ifdef STRATA_USE_CUDNN
  if (Strata::mode() == Strata::GPU) return this->GpuPrecision() != ElementType::kOwn;
#endif
  return onednn_ && onednn_->bf16();
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  conv_window::CheckShape(*bottom[0], channel_axis_, channels_, "Deconvolution");
  const std::vector<int>& shape = bottom[0]->shape();
  for (size_t i = 1; i < bottom.size(); ++i) {
    STRATA_REQUIRE(bottom[i]->shape() == shape)
        << "Deconvolution: all inputs must have the same shape: bottom 0 is " << bottom[0]->shape_string()
        << ", bottom " << i << " is " << bottom[i]->shape_string();
  }
  const int in_h = shape[channel_axis_ + 1], in_w = shape[channel_axis_ + 2];
  STRATA_REQUIRE(in_h > 0 && in_w > 0) << "Deconvolution: the input (shape " << bottom[0]->shape_string()
                                       << ") has an empty spatial axis";
  // Caffe's output size: the input size of a convolution whose output is the bottom.
  geom_.height = geom_.stride_h * (in_h - 1) + geom_.dilation_h * (geom_.kernel_h - 1) + 1 - 2 * geom_.pad_h;
  geom_.width = geom_.stride_w * (in_w - 1) + geom_.dilation_w * (geom_.kernel_w - 1) + 1 - 2 * geom_.pad_w;
  STRATA_REQUIRE(geom_.height > 0 && geom_.width > 0)
      << "Deconvolution: pad " << geom_.pad_h << " x " << geom_.pad_w << " leaves no output for the " << in_h
      << " x " << in_w << " input (kernel " << geom_.kernel_h << " x " << geom_.kernel_w << ", stride "
      << geom_.stride_h << " x " << geom_.stride_w << ", dilation " << geom_.dilation_h << " x "
      << geom_.dilation_w << ": output " << geom_.height << " x " << geom_.width << ")";
  num_ = bottom[0]->count(0, channel_axis_);

  std::vector<int> top_shape(shape.begin(), shape.begin() + channel_axis_);
  top_shape.insert(top_shape.end(), {num_output_, geom_.height, geom_.width});
  for (Blob<Dtype>* t : top) t->Reshape(top_shape);
  // oneDNN's primitives for this shape (kept when it is the last one's): the transpose of the convolution of
  // geom_ to the bottom's channels.
  if (onednn_ && num_ > 0) {
    onednn_conv::Shape s{num_, channels_, group_, bias_term_, geom_, bf16_};
    s.transposed = true;
    onednn_->Configure(s);
  }
}

// Per image and group g, with W_g the M x K block of rows g*M.. of the weights seen as C_in x K*group
// (M = C_in/group, K = (num_output/group) * kernel_h * kernel_w) and P the bottom's pixels:
//   forward:        col_g (K x P) = W_g^T x_g,  top = col2im(col) + bias
//   backward data:  dx_g (M x P) = W_g im2col(dy)_g
//   weights:        dW_g (M x K) += x_g im2col(dy)_g^T
template <typename Dtype>
void DeconvolutionLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      onednn_conv::ForwardEach(*onednn_, *this, bias_term_, bottom, top);
      return;
    }
  }
  const Dtype* w = this->blobs_[0]->cpu_data();
  const Dtype* bias = bias_term_ ? this->blobs_[1]->cpu_data() : nullptr;
  const int M = channels_ / group_, K = geom_.col_rows() / group_, P = geom_.out_count();
  const long top_plane = static_cast<long>(geom_.height) * geom_.width;
  const long top_dim = num_output_ * top_plane, bottom_dim = static_cast<long>(channels_) * P;
  Dtype* col = thread_workspace<Dtype>(static_cast<size_t>(geom_.col_rows()) * P);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const Dtype* x = bottom[i]->cpu_data();
    Dtype* y = top[i]->mutable_cpu_data();
    for (int n = 0; n < num_; ++n) {
      for (int g = 0; g < group_; ++g) {
        cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K, P, M, Dtype(1), w + static_cast<long>(g) * M * K,
                        x + n * bottom_dim + static_cast<long>(g) * M * P, Dtype(0), col + static_cast<long>(g) * K * P);
      }
      Dtype* yn = y + n * top_dim;
      col2im_cpu(col, geom_, yn);
      for (int o = 0; bias && o < num_output_; ++o) {
        Dtype* plane = yn + o * top_plane;
        for (long k = 0; k < top_plane; ++k) plane[k] += bias[o];
      }
    }
  }
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                             const BlobVec& bottom) {
  const bool weight_grad = this->param_propagate_down(0);
  const bool bias_grad = bias_term_ && this->param_propagate_down(1);
  Dtype* db = bias_grad ? this->blobs_[1]->mutable_cpu_diff() : nullptr;
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      onednn_conv::BackwardEach(*onednn_, *this, top, propagate_down, bottom, weight_grad, db);
      return;
    }
  }
  const Dtype* w = this->blobs_[0]->cpu_data();
  Dtype* dw = weight_grad ? this->blobs_[0]->mutable_cpu_diff() : nullptr;
  const int M = channels_ / group_, K = geom_.col_rows() / group_, P = geom_.out_count();
  const long top_plane = static_cast<long>(geom_.height) * geom_.width;
  const long top_dim = num_output_ * top_plane, bottom_dim = static_cast<long>(channels_) * P;
  Dtype* col = thread_workspace<Dtype>(static_cast<size_t>(geom_.col_rows()) * P);
  for (size_t i = 0; i < top.size(); ++i) {
    const Dtype* dy = top[i]->cpu_diff();
    const Dtype* x = bottom[i]->cpu_data();
    Dtype* dx = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    for (int n = 0; n < num_; ++n) {
      const Dtype* dyn = dy + n * top_dim;
      for (int o = 0; db && o < num_output_; ++o) {
        const Dtype* plane = dyn + o * top_plane;
        Dtype sum = 0;
        for (long k = 0; k < top_plane; ++k) sum += plane[k];
        db[o] += sum;
      }
      if (!dw && !dx) continue;
      im2col_cpu(dyn, geom_, col);
      for (int g = 0; g < group_; ++g) {
        const Dtype* col_g = col + static_cast<long>(g) * K * P;
        const long x_off = n * bottom_dim + static_cast<long>(g) * M * P;
        if (dw) {
          cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, M, K, P, Dtype(1), x + x_off, col_g, Dtype(1),
                          dw + static_cast<long>(g) * M * K);
        }
        if (dx) {
          cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, M, P, K, Dtype(1), w + static_cast<long>(g) * M * K, col_g,
                          Dtype(0), dx + x_off);
        }
      }
    }
  }
}

STRATA_INSTANTIATE_CLASS(DeconvolutionLayer);
REGISTER_LAYER_CLASS(Deconvolution);

}  // namespace strata
