#include "strata/layers/convolution_layer.hpp"

#include <algorithm>
#include <type_traits>

#include "conv_window_param.hpp"
#include "cpu_engine.hpp"
#include "onednn_convolution.hpp"
#include "strata/device.hpp"
#include "strata/filler.hpp"
#include "strata/layer_factory.hpp"
#include "strata/memory_format.hpp"
#include "weight_and_bias.hpp"
#include "strata/parallel.hpp"

namespace strata {

namespace {

// How many images one GEMM covers. A GEMM of fewer than ~200 columns is dominated by OpenBLAS packing the
// weights, so images with small outputs (7x7, 8x8) are unfolded side by side until there are that many columns.
// Wider GEMMs gain nothing measurable, while a column matrix that spills out of the caches costs more (im2col
// writes it, the GEMM packs it back), so larger images take one GEMM each and a chunk never outgrows
// kColumnBytes. A 1x1 stride-1 unpadded convolution whose images give enough columns on their own multiplies
// the input directly.
constexpr int kMinColumns = 192;
constexpr long kColumnBytes = 4L << 20;

// y (count x M x P) = out (M x count*P, image n at columns n*P) + bias[m] (bias may be null). Serial: a
// chunk is cache-sized, and an OpenMP region beside BLAS calls costs more than it saves (see im2col.hpp).
template <typename Dtype>
void ScatterImages(const Dtype* out, int count, int M, int P, const Dtype* bias, Dtype* y) {
  const long N = static_cast<long>(count) * P;
  for (int n = 0; n < count; ++n) {
    for (int m = 0; m < M; ++m) {
      const Dtype* src = out + m * N + static_cast<long>(n) * P;
      Dtype* dst = y + (static_cast<long>(n) * M + m) * P;
      const Dtype b = bias ? bias[m] : Dtype(0);
      for (int p = 0; p < P; ++p) dst[p] = src[p] + b;
    }
  }
}

// The inverse layout change: out (M x count*P) from dy (count x M x P).
template <typename Dtype>
void GatherImages(const Dtype* dy, int count, int M, int P, Dtype* out) {
  const long N = static_cast<long>(count) * P;
  for (int n = 0; n < count; ++n) {
    for (int m = 0; m < M; ++m) {
      std::copy_n(dy + (static_cast<long>(n) * M + m) * P, P, out + m * N + static_cast<long>(n) * P);
    }
  }
}

}  // namespace

template <typename Dtype>
void ConvolutionLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& p = this->layer_param_.convolution_param();
  conv_window::Read(p, *bottom[0], "Convolution", &channel_axis_, &geom_);

  geom_.channels = bottom[0]->shape(channel_axis_);
  num_output_ = static_cast<int>(p.num_output());
  group_ = static_cast<int>(p.group());
  bias_term_ = p.bias_term();
  STRATA_REQUIRE(num_output_ > 0) << "convolution_param.num_output must be positive";
  STRATA_REQUIRE(group_ > 0) << "convolution_param.group must be positive";
  STRATA_REQUIRE(geom_.channels > 0) << "the input (shape " << bottom[0]->shape_string() << ") has 0 channels";
  STRATA_REQUIRE(geom_.channels % group_ == 0)
      << "the input's " << geom_.channels << " channels do not divide into " << group_ << " groups";
  STRATA_REQUIRE(num_output_ % group_ == 0)
      << "num_output " << num_output_ << " does not divide into " << group_ << " groups";

  const std::vector<int> weight_shape{num_output_, geom_.channels / group_, geom_.kernel_h, geom_.kernel_w};
  SetUpWeightAndBias(&this->blobs_, weight_shape, bias_term_, num_output_, p.weight_filler(), p.bias_filler());
  this->param_propagate_down_.assign(this->blobs_.size(), true);

  // bfloat16 (precision: BF16) is oneDNN's: DEFAULT then means oneDNN; CAFFE (and a double net) compute in float.
  bf16_ = std::is_same<Dtype, float>::value && this->layer_param_.precision() == BF16;
  onednn_ = MakeOneDnnEngine<onednn_conv::Convolution, Dtype>(p, "Convolution", this->layer_param_.name(), bf16_);
}

template <typename Dtype>
typename Layer<Dtype>::GpuOrder ConvolutionLayer<Dtype>::GpuActivationOrder() const {
  const bool last = std::is_same<Dtype, float>::value && Strata::mode() == Strata::GPU &&
                    gpu_options().channels_last_for(ComputesIn16Bit());
  return last ? Layer<Dtype>::GpuOrder::kMakesChannelsLast : Layer<Dtype>::GpuOrder::kChannelsFirst;
}

template <typename Dtype>
bool ConvolutionLayer<Dtype>::ComputesIn16Bit() const {
#ifdef STRATA_USE_CUDNN
  if (Strata::mode() == Strata::GPU) return this->GpuPrecision() != ElementType::kOwn;
#endif
  return onednn_ && onednn_->bf16();
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const std::vector<int>& shape = bottom[0]->shape();
  STRATA_REQUIRE(bottom[0]->num_axes() == channel_axis_ + 3)
      << "input of shape " << bottom[0]->shape_string() << " no longer has 2 spatial axes";
  STRATA_REQUIRE(shape[channel_axis_] == geom_.channels)
      << "input has " << shape[channel_axis_] << " channels (shape " << bottom[0]->shape_string()
      << "), the weights expect " << geom_.channels;
  for (size_t i = 1; i < bottom.size(); ++i) {
    STRATA_REQUIRE(bottom[i]->shape() == shape)
        << "all inputs must have the same shape: bottom 0 is " << bottom[0]->shape_string() << ", bottom " << i
        << " is " << bottom[i]->shape_string();
  }
  geom_.height = shape[channel_axis_ + 1];
  geom_.width = shape[channel_axis_ + 2];
  STRATA_REQUIRE(geom_.height + 2 * geom_.pad_h >= geom_.dilation_h * (geom_.kernel_h - 1) + 1 &&
                 geom_.width + 2 * geom_.pad_w >= geom_.dilation_w * (geom_.kernel_w - 1) + 1)
      << "the " << geom_.kernel_h << " x " << geom_.kernel_w << " kernel (dilation " << geom_.dilation_h << " x "
      << geom_.dilation_w << ") is larger than the padded " << geom_.height << " x " << geom_.width << " input";
  num_ = bottom[0]->count(0, channel_axis_);
  out_count_ = geom_.out_count();
  col_rows_g_ = geom_.col_rows() / group_;

  std::vector<int> top_shape(shape.begin(), shape.begin() + channel_axis_);
  top_shape.insert(top_shape.end(), {num_output_, geom_.out_h(), geom_.out_w()});
  for (Blob<Dtype>* t : top) t->Reshape(top_shape);

  const long per_image = (static_cast<long>(geom_.col_rows()) + num_output_) * out_count_ * sizeof(Dtype);
  const long wanted = (kMinColumns + out_count_ - 1) / out_count_;
  chunk_ = static_cast<int>(std::max(1L, std::min({wanted, kColumnBytes / per_image, static_cast<long>(num_)})));
  direct_ = geom_.is_pointwise() && wanted == 1;
  // oneDNN's primitives for this shape (kept when it is the last one's); an empty batch has nothing to compute.
  if (onednn_ && num_ > 0) {
    onednn_conv::Shape s{num_, num_output_, group_, bias_term_, geom_, bf16_};
    s.relu = relu_ != nullptr;
    onednn_->Configure(s);
  }
  const int ones = std::max(1, chunk_ * out_count_);
  if (bias_multiplier_.count() != ones) {
    bias_multiplier_.set_memory_category(MemoryCategory::kWorkspace);
    bias_multiplier_.Reshape({ones});
    cpu_set(ones, Dtype(1), bias_multiplier_.mutable_cpu_data());
  }
}

template <typename Dtype>
const Dtype* ConvolutionLayer<Dtype>::Columns(const Dtype* x, int n0, int count, Dtype* col) const {
  const Dtype* images = x + static_cast<long>(n0) * geom_.channels * geom_.height * geom_.width;
  if (direct_) return images;
  im2col_batch_cpu(images, geom_, count, col);
  return col;
}

template <typename Dtype>
int ConvolutionLayer<Dtype>::Teams() const {
  // Multiply-adds of the whole batch: below parallel_worthwhile's bar one thread does it all.
  const long long work = static_cast<long long>(num_) * num_output_ * out_count_ * col_rows_g_;
  return parallel_worthwhile(work / 16) ? std::min(compute_threads(), num_) : 1;
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::SyncParams() {
  // Brings the weights to the host on this thread, so that the threads below only read them.
  for (auto& b : this->blobs_) b->cpu_data();
  bias_multiplier_.cpu_data();
}

template <typename Dtype>
template <typename RangeFn>
void ConvolutionLayer<Dtype>::ForEachTeam(int teams, RangeFn fn) const {
  if (teams <= 1) {
    fn(0, 0, num_);
    return;
  }
  // Each thread takes a contiguous range of images through the whole chunk loop: one parallel region per
  // layer call, and every GEMM, im2col and scatter inside it runs on the thread that owns its images.
#pragma omp parallel for schedule(static) num_threads(teams)
  for (int t = 0; t < teams; ++t) {
    fn(t, static_cast<int>(static_cast<long>(num_) * t / teams), static_cast<int>(static_cast<long>(num_) * (t + 1) / teams));
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::ForwardImages(const Dtype* x, Dtype* y, int n_begin, int n_end) const {
  const Dtype* w = this->blobs_[0]->cpu_data();
  const Dtype* bias = bias_term_ ? this->blobs_[1]->cpu_data() : nullptr;
  const int M = num_output_ / group_, K = col_rows_g_;
  const long top_dim = static_cast<long>(num_output_) * out_count_;
  const long col_count = direct_ ? 0 : static_cast<long>(geom_.col_rows()) * chunk_ * out_count_;
  Dtype* ws = thread_workspace<Dtype>(col_count + (chunk_ > 1 ? top_dim * chunk_ : 0));
  for (int n0 = n_begin; n0 < n_end; n0 += chunk_) {
    const int count = std::min(chunk_, n_end - n0);
    const int N = count * out_count_;
    const Dtype* col = Columns(x, n0, count, ws);
    // One image writes straight into the top; several go through a buffer in the workspace.
    Dtype* out = count == 1 ? y + n0 * top_dim : ws + col_count;
    for (int g = 0; g < group_; ++g) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, M, N, K, Dtype(1), w + static_cast<long>(g) * M * K,
                      col + static_cast<long>(g) * K * N, Dtype(0), out + static_cast<long>(g) * M * N);
    }
    if (count > 1) {
      ScatterImages(out, count, num_output_, out_count_, bias, y + n0 * top_dim);
    } else if (bias) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, num_output_, N, 1, Dtype(1), bias, bias_multiplier_.cpu_data(),
                      Dtype(1), out);
    }
  }
}

template <typename Dtype>
bool ConvolutionLayer<Dtype>::AcceptsBlockedBottoms() const {
  return onednn_ != nullptr;
}

template <typename Dtype>
bool ConvolutionLayer<Dtype>::Absorb(Layer<Dtype>& next) {
  if (!onednn_ || relu_) return false;
  auto* relu = dynamic_cast<ReLULayer<Dtype>*>(&next);
  if (!relu || relu->negative_slope() != Dtype(0)) return false;
  relu_ = relu;
  return true;
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if constexpr (std::is_same<Dtype, float>::value) {
    if (onednn_) {
      onednn_conv::ForwardEach(*onednn_, *this, bias_term_, bottom, top);
      return;
    }
  }
  const int teams = Teams();
  SyncParams();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const Dtype* x = bottom[i]->cpu_data();
    Dtype* y = top[i]->mutable_cpu_data();
    ForEachTeam(teams, [&](int, int n_begin, int n_end) { ForwardImages(x, y, n_begin, n_end); });
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::BackwardImages(const Dtype* dy_all, const Dtype* x, Dtype* dx, Dtype* dw, Dtype* db,
                                             int n_begin, int n_end) const {
  const Dtype* w = this->blobs_[0]->cpu_data();
  const int M = num_output_ / group_, K = col_rows_g_;
  const long top_dim = static_cast<long>(num_output_) * out_count_;
  const long bottom_dim = static_cast<long>(geom_.channels) * geom_.height * geom_.width;
  const long col_count = direct_ ? 0 : static_cast<long>(geom_.col_rows()) * chunk_ * out_count_;
  Dtype* ws = thread_workspace<Dtype>(col_count + (chunk_ > 1 ? top_dim * chunk_ : 0));
  for (int n0 = n_begin; n0 < n_end; n0 += chunk_) {
    const int count = std::min(chunk_, n_end - n0);
    const int N = count * out_count_;
    // The top gradient as num_output x N, like the forward GEMM's output.
    const Dtype* dy = dy_all + n0 * top_dim;
    if (count > 1) {
      GatherImages(dy, count, num_output_, out_count_, ws + col_count);
      dy = ws + col_count;
    }
    if (db) cpu_gemv<Dtype>(CblasNoTrans, num_output_, N, Dtype(1), dy, bias_multiplier_.cpu_data(), Dtype(1), db);
    if (dw) {
      const Dtype* col = Columns(x, n0, count, ws);
      for (int g = 0; g < group_; ++g) {
        cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, M, K, N, Dtype(1), dy + static_cast<long>(g) * M * N,
                        col + static_cast<long>(g) * K * N, Dtype(1), dw + static_cast<long>(g) * M * K);
      }
    }
    if (dx) {
      // Column gradients, then folded back onto the pixels they came from (the direct path needs no fold).
      Dtype* dcol = direct_ ? dx + n0 * bottom_dim : ws;
      for (int g = 0; g < group_; ++g) {
        cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, K, N, M, Dtype(1), w + static_cast<long>(g) * M * K,
                        dy + static_cast<long>(g) * M * N, Dtype(0), dcol + static_cast<long>(g) * K * N);
      }
      if (!direct_) col2im_batch_cpu(ws, geom_, count, dx + n0 * bottom_dim);
    }
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
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
  Dtype* dw = weight_grad ? this->blobs_[0]->mutable_cpu_diff() : nullptr;
  SyncParams();
  const int teams = Teams();
  // Threads other than the first accumulate their images' parameter gradients privately; the sums are added
  // in thread order afterwards, so a given thread count always gives the same result.
  const long w_count = this->blobs_[0]->count();
  const long b_count = bias_grad ? num_output_ : 0;
  if (teams > 1 && (dw || db)) {
    partials_.set_memory_category(MemoryCategory::kWorkspace);
    partials_.Reshape({static_cast<int>((teams - 1) * (w_count + b_count))});
  }
  for (size_t i = 0; i < top.size(); ++i) {
    if (!weight_grad && !bias_grad && !propagate_down[i]) continue;
    const Dtype* dy = top[i]->cpu_diff();
    const Dtype* x = bottom[i]->cpu_data();
    Dtype* dx = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    Dtype* partial = (teams > 1 && (dw || db)) ? partials_.mutable_cpu_data() : nullptr;
    if (partial) cpu_set<Dtype>(partials_.count(), Dtype(0), partial);
    ForEachTeam(teams, [&](int t, int n_begin, int n_end) {
      Dtype* own = t == 0 ? nullptr : partial + (t - 1) * (w_count + b_count);
      BackwardImages(dy, x, dx, t == 0 ? dw : (dw ? own : nullptr), t == 0 ? db : (db ? own + w_count : nullptr),
                     n_begin, n_end);
    });
    for (int t = 1; partial && t < teams; ++t) {
      const Dtype* own = partial + (t - 1) * (w_count + b_count);
      if (dw) cpu_axpy<Dtype>(static_cast<int>(w_count), Dtype(1), own, dw);
      if (db) cpu_axpy<Dtype>(static_cast<int>(b_count), Dtype(1), own + w_count, db);
    }
  }
}

STRATA_INSTANTIATE_CLASS(ConvolutionLayer);
REGISTER_LAYER_CLASS(Convolution);

}  // namespace strata
