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

// Seeds of the two random streams derived from the layer's seed: per-position transforms (as the Data
// layer's) and per-epoch shuffles.
uint64_t TransformSeed(uint64_t seed, uint64_t position) { return seed + position * 0xd1b54a32d192ed03ULL; }
uint64_t ShuffleSeed(uint64_t seed, uint64_t epoch) { return (seed ^ 0x9e3779b97f4a7c15ULL) + epoch * 0xbf58476d1ce4e5b9ULL; }

}  // namespace


template <typename Dtype>
ImageDataLayer<Dtype>::~ImageDataLayer() {
  StopPrefetch();
}

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
  STRATA_REQUIRE(prefetch > 0) << "data_param.prefetch must be at least 1, got " << prefetch;
  source_ = ip.source();
  root_ = ip.root_folder();
  new_height_ = static_cast<int>(ip.new_height());
  new_width_ = static_cast<int>(ip.new_width());
  is_color_ = ip.is_color();
  shuffle_ = ip.shuffle();
  batch_size_ = static_cast<int>(ip.batch_size());
  rank_ = Strata::solver_rank();
  count_ = Strata::solver_count();
  CHECK(rank_ >= 0 && rank_ < count_) << "bad solver rank " << rank_ << " of " << count_;

  lines_ = ReadImageList(source_);
  STRATA_REQUIRE(!lines_.empty()) << "image list file '" << source_ << "' names no images";

  seed_ = Strata::draw_seed();
  transformer_.reset(new DataTransformer<Dtype>(MergedTransformParam(this->layer_param_), this->phase_, seed_));
  position_ = 0;
  if (ip.rand_skip() > 0) {
    position_ = Strata::draw_seed() % ip.rand_skip();
    STRATA_REQUIRE(position_ < lines_.size()) << "rand_skip drew a skip of " << position_ << " but '" << source_
                                              << "' names only " << lines_.size() << " images";
  }

  // The first image read sets the shape of every image (a crop may take same-channel images of any size
  // at least crop_size).
  order_epoch_ = UINT64_MAX;
  LoadImage(EntryAt(position_));
  item_shape_ = transformer_->OutputShape(pixels_.channels(), pixels_.height(), pixels_.width());
  std::vector<int> data_shape{batch_size_};
  data_shape.insert(data_shape.end(), item_shape_.begin(), item_shape_.end());
  const std::vector<int> label_shape{batch_size_};
  top[0]->Reshape(data_shape);
  top[1]->Reshape(label_shape);

  batches_.clear();
  for (uint32_t i = 0; i < prefetch; ++i) {
    batches_.emplace_back(new Batch);
    Batch& b = *batches_.back();
    b.data.Reshape(data_shape);
    b.label.Reshape(label_shape);
    b.data.mutable_cpu_data();  // allocate now, on this thread, never in the loop
    b.label.mutable_cpu_data();
  }
  LOG(INFO) << "ImageData layer '" << this->layer_param_.name() << "': " << lines_.size() << " images in '"
            << source_ << "'" << (shuffle_ ? " (shuffled)" : "") << ", batch " << top[0]->shape_string()
            << ", rank " << rank_ << " of " << count_
            << (position_ ? ", skipping " + std::to_string(position_) + " images" : std::string());
  StartPrefetch();
}

template <typename Dtype>
const ImageListEntry& ImageDataLayer<Dtype>::EntryAt(uint64_t g) {
  const uint64_t n = lines_.size();
  if (!shuffle_) return lines_[g % n];
  const uint64_t epoch = g / n;
  if (epoch != order_epoch_) {
    // Fisher-Yates with a 64-bit engine, written out so that the order is the same with every standard library.
    std::mt19937_64 engine(ShuffleSeed(seed_, epoch));
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
    pixels_.Load(datum_, transformer_->color_mode());
  } catch (const Error& e) {
    STRATA_FAIL() << where(entry) << ": " << e.what();
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::StartPrefetch() {
  CHECK(!thread_.joinable());
  free_.reset(batches_.size());
  full_.reset(batches_.size());
  for (auto& b : batches_) free_.push(b.get());
  stop_ = false;
  error_.clear();
  thread_ = std::thread(&ImageDataLayer<Dtype>::PrefetchLoop, this, position_);
}

template <typename Dtype>
void ImageDataLayer<Dtype>::StopPrefetch() {
  if (!thread_.joinable()) return;
  stop_ = true;
  free_.close();
  full_.close();
  thread_.join();
}

template <typename Dtype>
void ImageDataLayer<Dtype>::set_position(uint64_t position) {
  set_record_stream({position, seed_});
}

template <typename Dtype>
void ImageDataLayer<Dtype>::set_record_stream(const typename Layer<Dtype>::RecordStream& stream) {
  CHECK(transformer_) << "set_record_stream before SetUp";
  StopPrefetch();
  position_ = stream.position;
  seed_ = stream.seed;
  order_epoch_ = UINT64_MAX;  // the permutations follow the seed
  StartPrefetch();
}

template <typename Dtype>
void ImageDataLayer<Dtype>::set_shard(int rank, int count) {
  CHECK(transformer_) << "set_shard before SetUp";
  STRATA_REQUIRE(count > 0 && rank >= 0 && rank < count) << "bad data shard: rank " << rank << " of " << count;
  StopPrefetch();
  rank_ = rank;
  count_ = count;
  StartPrefetch();
}

template <typename Dtype>
void ImageDataLayer<Dtype>::PrefetchLoop(uint64_t start) {
  Batch* batch = nullptr;
  try {
    for (uint64_t next = start; !stop_; next += stride()) {
      if (!free_.pop(&batch)) return;
      batch->start = next;
      batch->error.clear();
      FillBatch(batch);
      full_.push(batch);
      batch = nullptr;
    }
  } catch (const std::exception& e) {
    // Hand the failure to the main thread in a batch; Forward turns it into an Error there.
    if (!batch && !free_.pop(&batch)) return;
    batch->error = e.what();
    full_.push(batch);
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::FillBatch(Batch* batch) {
  const uint64_t first = batch->start + static_cast<uint64_t>(rank_) * batch_size_;
  const int item_count = item_shape_[0] * item_shape_[1] * item_shape_[2];
  const int crop = static_cast<int>(transformer_->param().crop_size());
  Dtype* data = batch->data.mutable_cpu_data();
  Dtype* label = batch->label.mutable_cpu_data();
  for (int i = 0; i < batch_size_; ++i) {
    if (stop_) return;
    const ImageListEntry& entry = EntryAt(first + i);
    LoadImage(entry);
    const bool fits = pixels_.channels() == item_shape_[0] &&
                      (crop ? pixels_.height() >= crop && pixels_.width() >= crop
                            : pixels_.height() == item_shape_[1] && pixels_.width() == item_shape_[2]);
    STRATA_REQUIRE(fits) << where(entry) << " is " << pixels_.channels() << " x " << pixels_.height() << " x " << pixels_.width()
                         << " but the first image makes the data " << item_shape_[0] << " x " << item_shape_[1]
                         << " x " << item_shape_[2] << " (set new_height and new_width to resize every image)";
    // The random crop and mirror of an image depend only on the seed and its global position.
    transformer_->Reseed(TransformSeed(seed_, first + i));
    transformer_->Transform(pixels_, data + static_cast<size_t>(i) * item_count);
    label[i] = static_cast<Dtype>(entry.label);
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (!error_.empty()) STRATA_FAIL() << this->describe() << ": " << error_;
  Batch* batch = nullptr;
  CHECK(full_.pop(&batch)) << "the prefetch queue was closed while the layer runs";
  if (!batch->error.empty()) {
    // The thread has stopped; every later Forward repeats the error until set_position() restarts it.
    error_ = batch->error;
    free_.push(batch);
    STRATA_FAIL() << this->describe() << ": " << error_;
  }
  std::memcpy(top[0]->mutable_cpu_data(), batch->data.cpu_data(), sizeof(Dtype) * batch->data.count());
  std::memcpy(top[1]->mutable_cpu_data(), batch->label.cpu_data(), sizeof(Dtype) * batch->label.count());
  position_ = batch->start + stride();
  free_.push(batch);
}

STRATA_INSTANTIATE_CLASS(ImageDataLayer);
REGISTER_LAYER_CLASS(ImageData);

}  // namespace strata
