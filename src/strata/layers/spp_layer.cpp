#include "strata/layers/spp_layer.hpp"

#include <string>

#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// The copies between the levels and the top, on the host or the device.
template <typename Dtype>
void CopyRows(bool gpu, int rows, int width, const Dtype* src, int src_stride, Dtype* dst, int dst_stride) {
#ifdef STRATA_USE_CUDA
  if (gpu) return gpu_copy_rows(rows, width, src, src_stride, dst, dst_stride);
#endif
  cpu_copy_rows(rows, width, src, src_stride, dst, dst_stride);
}

template <typename Dtype>
void Add(bool gpu, int n, const Dtype* x, Dtype* y) {
#ifdef STRATA_USE_CUDA
  if (gpu) return gpu_axpy(n, Dtype(1), x, y);
#endif
  cpu_axpy(n, Dtype(1), x, y);
}

template <typename Dtype>
const Dtype* Data(const Blob<Dtype>& b, bool gpu, bool diff) {
#ifdef STRATA_USE_CUDA
  if (gpu) return diff ? b.gpu_diff() : b.gpu_data();
#endif
  return diff ? b.cpu_diff() : b.cpu_data();
}

template <typename Dtype>
Dtype* MutableData(Blob<Dtype>* b, bool gpu, bool diff) {
#ifdef STRATA_USE_CUDA
  if (gpu) return diff ? b->mutable_gpu_diff() : b->mutable_gpu_data();
#endif
  return diff ? b->mutable_cpu_diff() : b->mutable_cpu_data();
}

}  // namespace

template <typename Dtype>
PoolingParameter SPPLayer<Dtype>::LevelParam(int level, int height, int width, SPPParameter::PoolMethod pool) {
  const int bins = 1 << level;
  // The smallest kernel whose `bins` windows cover the image, and the shortfall split as padding (the larger
  // half first, as Caffe rounds it).
  const int kernel_h = (height + bins - 1) / bins, kernel_w = (width + bins - 1) / bins;
  PoolingParameter p;
  p.set_kernel_h(kernel_h);
  p.set_kernel_w(kernel_w);
  p.set_stride_h(kernel_h);
  p.set_stride_w(kernel_w);
  p.set_pad_h((kernel_h * bins - height + 1) / 2);
  p.set_pad_w((kernel_w * bins - width + 1) / 2);
  p.set_pool(pool == SPPParameter::MAX   ? PoolingParameter::MAX
             : pool == SPPParameter::AVE ? PoolingParameter::AVE
                                         : PoolingParameter::STOCHASTIC);
  return p;
}

template <typename Dtype>
void SPPLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SPPParameter& p = this->layer_param_.spp_param();
  STRATA_REQUIRE(p.pyramid_height() > 0) << "SPP: spp_param.pyramid_height must be positive";
  pyramid_height_ = static_cast<int>(p.pyramid_height());
  // The finest level's 2^(pyramid_height-1) bins per side must fit an int.
  STRATA_REQUIRE(pyramid_height_ <= 31) << "SPP: pyramid_height " << pyramid_height_ << " is too large (at most 31)";
  height_ = width_ = -1;
  level_grad_.set_memory_category(MemoryCategory::kWorkspace);
}

template <typename Dtype>
void SPPLayer<Dtype>::BuildLevels(const BlobVec& bottom, const BlobVec& top) {
  const SPPParameter& p = this->layer_param_.spp_param();
  levels_.clear();
  pooled_.clear();
  for (int l = 0; l < pyramid_height_; ++l) {
    LayerParameter lp;
    lp.set_name(this->layer_param_.name() + "/level" + std::to_string(l));
    lp.set_type("Pooling");
    lp.set_phase(this->phase_);  // what STOCHASTIC pooling does depends on it
    *lp.mutable_pooling_param() = LevelParam(l, height_, width_, p.pool());
    const PoolingParameter& pp = lp.pooling_param();
    STRATA_REQUIRE(pp.pad_h() < pp.kernel_h() && pp.pad_w() < pp.kernel_w())
        << "SPP: the " << height_ << " x " << width_ << " input is too small for pyramid_height " << pyramid_height_
        << ": level " << l << " (" << (1 << l) << " x " << (1 << l) << " bins) would need kernel " << pp.kernel_h()
        << " x " << pp.kernel_w() << " with pad " << pp.pad_h() << " x " << pp.pad_w()
        << ", and pooling needs pad < kernel";
    levels_.emplace_back(new PoolingLayer<Dtype>(lp));
    if (pyramid_height_ == 1) {
      levels_[0]->SetUp(bottom, top);
    } else {
      pooled_.emplace_back(new Blob<Dtype>());
      levels_[l]->SetUp(bottom, {pooled_[l].get()});
    }
  }
}

template <typename Dtype>
void SPPLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() == 4) << "SPP: input must have 4 axes (num, channels, height, width), got shape "
                                             << bottom[0]->shape_string();
  STRATA_REQUIRE(bottom[0]->height() > 0 && bottom[0]->width() > 0)
      << "SPP: input dimensions cannot be zero (shape " << bottom[0]->shape_string() << ")";
  if (bottom[0]->height() != height_ || bottom[0]->width() != width_) {
    // The windows depend on the image size: new levels for a new size.
    height_ = bottom[0]->height();
    width_ = bottom[0]->width();
    BuildLevels(bottom, top);
  } else if (pyramid_height_ == 1) {
    levels_[0]->Reshape(bottom, top);
  } else {
    for (int l = 0; l < pyramid_height_; ++l) levels_[l]->Reshape(bottom, {pooled_[l].get()});
  }
  if (pyramid_height_ == 1) return;
  int total = 0;
  for (int l = 0; l < pyramid_height_; ++l) {
    CHECK_EQ(pooled_[l]->height(), 1 << l) << "SPP level " << l << " pooled to " << pooled_[l]->shape_string();
    total += pooled_[l]->count(1);
  }
  top[0]->Reshape({bottom[0]->num(), total});
  level_grad_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
bool SPPLayer<Dtype>::BackwardNeedsBottomData() const {
  for (const auto& level : levels_) {
    if (level->BackwardNeedsBottomData()) return true;
  }
  return false;
}

template <typename Dtype>
bool SPPLayer<Dtype>::IsStochastic() const {
  for (const auto& level : levels_) {
    if (level->IsStochastic()) return true;
  }
  return false;
}

template <typename Dtype>
std::vector<Blob<Dtype>*> SPPLayer<Dtype>::SavedActivations() {
  std::vector<Blob<Dtype>*> saved;
  for (auto& level : levels_) {
    for (Blob<Dtype>* b : level->SavedActivations()) saved.push_back(b);
  }
  return saved;
}

template <typename Dtype>
void SPPLayer<Dtype>::ForwardLevels(const BlobVec& bottom, const BlobVec& top, bool gpu) {
  if (pyramid_height_ == 1) {
    levels_[0]->Forward(bottom, top);
    return;
  }
  const int num = bottom[0]->num(), total = top[0]->count(1);
  int offset = 0;  // where the level's columns start in each top row
  for (int l = 0; l < pyramid_height_; ++l) {
    levels_[l]->Forward(bottom, {pooled_[l].get()});
    const int width = pooled_[l]->count(1);
    if (num > 0) {
      CopyRows(gpu, num, width, Data(*pooled_[l], gpu, false), width, MutableData(top[0], gpu, false) + offset, total);
    }
    offset += width;
  }
}

template <typename Dtype>
void SPPLayer<Dtype>::BackwardLevels(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom, bool gpu) {
  if (!propagate_down[0]) return;
  if (pyramid_height_ == 1) {
    levels_[0]->Backward(top, propagate_down, bottom);
    return;
  }
  const int num = bottom[0]->num(), total = top[0]->count(1);
  if (num == 0) return;
  int offset = 0;
  for (int l = 0; l < pyramid_height_; ++l) {
    const int width = pooled_[l]->count(1);
    CopyRows(gpu, num, width, Data(*top[0], gpu, true) + offset, total, MutableData(pooled_[l].get(), gpu, true),
             width);
    offset += width;
    // Pooling's backward overwrites its bottom's gradient: the first level writes the bottom's, later levels a
    // scratch gradient that is then added.
    Blob<Dtype>* target = l == 0 ? bottom[0] : &level_grad_;
    levels_[l]->Backward({pooled_[l].get()}, {true}, {target});
    if (l > 0) Add(gpu, bottom[0]->count(), Data(level_grad_, gpu, true), MutableData(bottom[0], gpu, true));
  }
}

STRATA_INSTANTIATE_CLASS(SPPLayer);
REGISTER_LAYER_CLASS(SPP);

}  // namespace strata
