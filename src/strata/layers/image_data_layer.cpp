#include "strata/layers/image_data_layer.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>

#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// Caffe's V1 image_data_param carried the transformation fields; they are taken as transform_param's here,
// as the Data layer does for data_param's.
TransformationParameter MergedTransformParam(const LayerParameter& lp) {
  TransformationParameter tp = lp.transform_param();
  const ImageDataParameter& ip = lp.image_data_param();
  if (ip.has_scale()) tp.set_scale(ip.scale());
  if (ip.has_mean_file()) tp.set_mean_file(ip.mean_file());
  if (ip.has_crop_size()) tp.set_crop_size(ip.crop_size());
  if (ip.has_mirror()) tp.set_mirror(ip.mirror());
  return tp;
}

// The seed of an epoch's shuffle, derived from the layer's seed (the transforms draw from it per position).
uint64_t ShuffleSeed(uint64_t seed, uint64_t epoch) { return (seed ^ 0x9e3779b97f4a7c15ULL) + epoch * 0xbf58476d1ce4e5b9ULL; }

}  // namespace


template <typename Dtype>
void ImageDataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ImageDataParameter& ip = this->layer_param_.image_data_param();
  const uint32_t prefetch = this->layer_param_.data_param().prefetch();  // Caffe's prefetch depth for every data layer
  STRATA_REQUIRE(HaveImageCodecs()) << "the ImageData layer decodes images with OpenCV, and Strata was built "
                                       "without it (STRATA_USE_OPENCV off)";
  STRATA_REQUIRE(!ip.source().empty()) << "image_data_param.source (the image list file) is not set";
  STRATA_REQUIRE(ip.batch_size() > 0) << "image_data_param.batch_size must be positive, got " << ip.batch_size();
  STRATA_REQUIRE((ip.new_height() == 0) == (ip.new_width() == 0))
      << "image_data_param: give both new_height and new_width, or neither (got " << ip.new_height() << " x "
      << ip.new_width() << ")";
  source_ = ip.source();
  root_ = ip.root_folder();
  new_height_ = static_cast<int>(ip.new_height());
  new_width_ = static_cast<int>(ip.new_width());
  is_color_ = ip.is_color();
  shuffle_ = ip.shuffle();

  lines_ = ReadImageList(source_);
  STRATA_REQUIRE(!lines_.empty()) << "image list file '" << source_ << "' names no images";

  this->SetUpStream(static_cast<int>(ip.batch_size()), MergedTransformParam(this->layer_param_));
  this->position_ = 0;
  if (ip.rand_skip() > 0) {
    this->position_ = Strata::draw_seed() % ip.rand_skip();
    STRATA_REQUIRE(this->position_ < lines_.size()) << "rand_skip drew a skip of " << this->position_ << " but '"
                                                    << source_ << "' names only " << lines_.size() << " images";
  }

  // The first image read sets the shape of every image (a crop may take same-channel images of any size
  // at least crop_size).
  order_epoch_ = UINT64_MAX;
  LoadImage(EntryAt(this->position_));
  this->StartBatches(
      this->transformer_->OutputShape(this->pixels_.channels(), this->pixels_.height(), this->pixels_.width()),
      prefetch, top);
  LOG(INFO) << "ImageData layer '" << this->layer_param_.name() << "': " << lines_.size() << " images in '"
            << source_ << "'" << (shuffle_ ? " (shuffled)" : "") << ", batch " << top[0]->shape_string()
            << ", shard " << this->data_shard().index << " of " << this->data_shard().count
            << (this->position_ ? ", skipping " + std::to_string(this->position_) + " images" : std::string());
}

template <typename Dtype>
const ImageListEntry& ImageDataLayer<Dtype>::EntryAt(uint64_t g) {
  const uint64_t n = lines_.size();
  if (!shuffle_) return lines_[g % n];
  const uint64_t epoch = g / n;
  if (epoch != order_epoch_) {
    // Fisher-Yates with a 64-bit engine, written out so that the order is the same with every standard library.
    std::mt19937_64 engine(ShuffleSeed(this->seed_, epoch));
    order_.resize(n);
    for (size_t i = 0; i < n; ++i) order_[i] = i;
    for (size_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[engine() % (i + 1)]);
    order_epoch_ = epoch;
  }
  return lines_[order_[g % n]];
}

template <typename Dtype>
std::string ImageDataLayer<Dtype>::where(const ImageListEntry& entry) const {
  std::ostringstream s;
  s << "image '" << root_ << entry.path << "' (" << source_ << ":" << entry.line << ")";
  return s.str();
}

template <typename Dtype>
void ImageDataLayer<Dtype>::LoadImage(const ImageListEntry& entry) {
  try {
    STRATA_REQUIRE(ReadImageToDatum(root_ + entry.path, entry.label, new_height_, new_width_, is_color_, "", &datum_))
        << "cannot read it as an image";
    this->pixels_.Load(datum_, this->transformer_->color_mode());
  } catch (const Error& e) {
    STRATA_FAIL() << where(entry) << ": " << e.what();
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::FillBatch(Batch* batch) {
  const uint64_t first = this->first_position(*batch);
  Dtype* label = batch->label.mutable_cpu_data();
  for (int i = 0; i < this->batch_size_; ++i) {
    if (this->stop_) return;
    const ImageListEntry& entry = EntryAt(first + i);
    LoadImage(entry);
    const std::string mismatch = this->ShapeMismatch();
    STRATA_REQUIRE(mismatch.empty()) << where(entry) << " " << mismatch
                                     << " (set new_height and new_width to resize every image)";
    this->TransformInto(first + i, batch, i);
    label[i] = static_cast<Dtype>(entry.label);
  }
}

STRATA_INSTANTIATE_CLASS(ImageDataLayer);
REGISTER_LAYER_CLASS(ImageData);

}  // namespace strata
