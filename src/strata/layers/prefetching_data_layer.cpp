#include "strata/layers/prefetching_data_layer.hpp"

#include <cstring>
#include <exception>
#include <sstream>

namespace strata {

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::SetUpStream(int batch_size, const TransformationParameter& transform) {
  batch_size_ = batch_size;
  seed_ = Strata::draw_seed();
  transformer_.reset(new DataTransformer<Dtype>(transform, this->phase_, seed_));
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::StartBatches(const std::vector<int>& item_shape, uint32_t prefetch,
                                               const BlobVec& top) {
  STRATA_REQUIRE(prefetch > 0) << "data_param.prefetch must be at least 1, got " << prefetch;
  item_shape_ = item_shape;
  output_labels_ = top.size() > 1;
  std::vector<int> data_shape{batch_size_};
  data_shape.insert(data_shape.end(), item_shape_.begin(), item_shape_.end());
  const std::vector<int> label_shape{batch_size_};
  top[0]->Reshape(data_shape);
  if (output_labels_) top[1]->Reshape(label_shape);

  StopPrefetch();
  batches_.clear();
  for (uint32_t i = 0; i < prefetch; ++i) {
    batches_.emplace_back(new Batch);
    Batch& b = *batches_.back();
    b.data.Reshape(data_shape);
    b.label.Reshape(label_shape);
    b.data.mutable_cpu_data();  // allocate now, on this thread, never in the loop
    b.label.mutable_cpu_data();
  }
  StartPrefetch();
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::StartPrefetch() {
  CHECK(!thread_.joinable());
  free_.reset(batches_.size());
  full_.reset(batches_.size());
  for (auto& b : batches_) free_.push(b.get());
  stop_ = false;
  error_.clear();
  thread_ = std::thread(&PrefetchingDataLayer<Dtype>::PrefetchLoop, this, position_);
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::StopPrefetch() {
  if (!thread_.joinable()) return;
  stop_ = true;
  free_.close();
  full_.close();
  thread_.join();
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::set_record_stream(const RecordStream& stream) {
  CHECK(transformer_) << "set_record_stream before SetUp";
  StopPrefetch();
  position_ = stream.position;
  seed_ = stream.seed;
  OnRestart();
  StartPrefetch();
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::set_shard(int rank, int count) {
  CHECK(transformer_) << "set_shard before SetUp";
  StopPrefetch();
  this->set_data_shard({rank, count});
  OnRestart();
  StartPrefetch();
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::PrefetchLoop(uint64_t start) {
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
std::string PrefetchingDataLayer<Dtype>::ShapeMismatch() const {
  const int crop = static_cast<int>(transformer_->param().crop_size());
  const bool fits = pixels_.channels() == item_shape_[0] &&
                    (crop ? pixels_.height() >= crop && pixels_.width() >= crop
                          : pixels_.height() == item_shape_[1] && pixels_.width() == item_shape_[2]);
  if (fits) return "";
  std::ostringstream s;
  s << "is " << pixels_.channels() << " x " << pixels_.height() << " x " << pixels_.width()
    << " but the first record makes the data " << item_shape_[0] << " x " << item_shape_[1] << " x "
    << item_shape_[2];
  return s.str();
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::TransformInto(uint64_t position, Batch* batch, int i) {
  const size_t item_count = static_cast<size_t>(item_shape_[0]) * item_shape_[1] * item_shape_[2];
  // The random crop and mirror of a record depend only on the seed and its global position.
  transformer_->Reseed(seed_ + position * 0xd1b54a32d192ed03ULL);
  transformer_->Transform(pixels_, batch->data.mutable_cpu_data() + i * item_count);
}

template <typename Dtype>
void PrefetchingDataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (!error_.empty()) STRATA_FAIL() << this->describe() << ": " << error_;
  Batch* batch = nullptr;
  CHECK(full_.pop(&batch)) << "the prefetch queue was closed while the layer runs";
  if (!batch->error.empty()) {
    // The thread has stopped; every later Forward repeats the error until a restart.
    error_ = batch->error;
    free_.push(batch);
    STRATA_FAIL() << this->describe() << ": " << error_;
  }
  std::memcpy(top[0]->mutable_cpu_data(), batch->data.cpu_data(), sizeof(Dtype) * batch->data.count());
  if (output_labels_) {
    std::memcpy(top[1]->mutable_cpu_data(), batch->label.cpu_data(), sizeof(Dtype) * batch->label.count());
  }
  position_ = batch->start + stride();
  free_.push(batch);
}

STRATA_INSTANTIATE_CLASS(PrefetchingDataLayer);

}  // namespace strata
