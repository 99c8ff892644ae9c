#include "strata/layers/upsample_layer.hpp"

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
void UpsampleLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  STRATA_REQUIRE(bottom[0]->num_axes() == 4)
      << this->describe() << ": needs an (N, C, H, W) input, got shape " << bottom[0]->shape_string();
  STRATA_REQUIRE(top[0] != bottom[0]) << this->describe() << " cannot work in place";
  top[0]->Reshape({bottom[0]->num(), bottom[0]->channels(), 2 * bottom[0]->height(), 2 * bottom[0]->width()});
}

template <typename Dtype>
void UpsampleLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  const int planes = bottom[0]->num() * bottom[0]->channels();
  const int h = bottom[0]->height(), w = bottom[0]->width();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int p = 0; p < planes; ++p) {
    const Dtype* xp = x + static_cast<size_t>(p) * h * w;
    Dtype* yp = y + static_cast<size_t>(p) * 4 * h * w;
    for (int i = 0; i < 2 * h; ++i)
      for (int j = 0; j < 2 * w; ++j) yp[i * 2 * w + j] = xp[(i / 2) * w + j / 2];
  }
}

template <typename Dtype>
void UpsampleLayer<Dtype>::Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                        const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int planes = bottom[0]->num() * bottom[0]->channels();
  const int h = bottom[0]->height(), w = bottom[0]->width();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int p = 0; p < planes; ++p) {
    const Dtype* dyp = dy + static_cast<size_t>(p) * 4 * h * w;
    Dtype* dxp = dx + static_cast<size_t>(p) * h * w;
    for (int i = 0; i < h; ++i) {
      for (int j = 0; j < w; ++j) {
        const Dtype* block = dyp + 2 * i * 2 * w + 2 * j;
        dxp[i * w + j] = block[0] + block[1] + block[2 * w] + block[2 * w + 1];
      }
    }
  }
}

STRATA_INSTANTIATE_CLASS(UpsampleLayer);
REGISTER_LAYER_CLASS(Upsample);

}  // namespace strata
