#include "strata/layers/data_layer.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <sstream>

#include "strata/layer_factory.hpp"

namespace strata {

namespace {

// Caffe moves the transformation fields that once lived in data_param into transform_param on load;
// doing it here makes old prototxts behave the same.
TransformationParameter MergedTransformParam(const LayerParameter& lp) {
  TransformationParameter tp = lp.transform_param();
  const DataParameter& dp = lp.data_param();
  if (dp.has_scale()) tp.set_scale(dp.scale());
  if (dp.has_mean_file()) tp.set_mean_file(dp.mean_file());
  if (dp.has_crop_size()) tp.set_crop_size(dp.crop_size());
  if (dp.has_mirror()) tp.set_mirror(dp.mirror());
  return tp;
}

// The backend data_param names. Caffe's default is LEVELDB, but prototxts written for Strata (and many for
// Caffe) leave it out for an LMDB: without the field the source decides (a LevelDB directory has a CURRENT file,
// an LMDB a data.mdb).
RecordBackend Backend(const DataParameter& dp) {
  if (dp.has_backend()) return dp.backend() == DataParameter::LEVELDB ? RecordBackend::kLevelDb : RecordBackend::kLmdb;
  struct stat st;
  STRATA_REQUIRE(::stat(dp.source().c_str(), &st) == 0)
      << "cannot open '" << dp.source() << "' (data_param.source, an LMDB or a LevelDB: no backend is given): "
      << std::strerror(errno);
  const bool leveldb = ::stat((dp.source() + "/CURRENT").c_str(), &st) == 0 &&
                       ::stat((dp.source() + "/data.mdb").c_str(), &st) != 0;
  return leveldb ? RecordBackend::kLevelDb : RecordBackend::kLmdb;
}

}  // namespace

template <typename Dtype>
DataLayer<Dtype>::~DataLayer() {
  StopPrefetch();
}

template <typename Dtype>
std::string DataLayer<Dtype>::where(const RecordCursor& cursor) const {
  std::ostringstream s;
  s << db_->backend() << " '" << db_->path() << "', " << cursor.describe_key() << " (record " << cursor.index() << ")";
  return s.str();
}

template <typename Dtype>
void DataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DataParameter& dp = this->layer_param_.data_param();
  STRATA_REQUIRE(!dp.source().empty()) << "data_param.source (the database to read) is not set";
  STRATA_REQUIRE(dp.batch_size() > 0) << "data_param.batch_size must be positive, got " << dp.batch_size();
  STRATA_REQUIRE(dp.prefetch() > 0) << "data_param.prefetch must be at least 1, got " << dp.prefetch();
  batch_size_ = static_cast<int>(dp.batch_size());
  output_labels_ = top.size() > 1;
  rank_ = Strata::solver_rank();
  count_ = Strata::solver_count();
  CHECK(rank_ >= 0 && rank_ < count_) << "bad solver rank " << rank_ << " of " << count_;

  seed_ = Strata::draw_seed();
  transformer_.reset(new DataTransformer<Dtype>(MergedTransformParam(this->layer_param_), this->phase_, seed_));
  db_ = OpenRecords(dp.source(), Backend(dp));

  // The first record sets the shape of every record (a crop may take same-channel records of any size
  // at least crop_size).
  {
    auto cursor = db_->NewCursor();
    STRATA_REQUIRE(ParseDatum(cursor->value(), &datum_)) << where(*cursor) << " is not a Datum";
    try {
      pixels_.Load(datum_, transformer_->color_mode());
      item_shape_ = transformer_->OutputShape(pixels_.channels(), pixels_.height(), pixels_.width());
    } catch (const Error& e) {
      STRATA_FAIL() << where(*cursor) << ": " << e.what();
    }
  }
  std::vector<int> data_shape{batch_size_};
  data_shape.insert(data_shape.end(), item_shape_.begin(), item_shape_.end());
  const std::vector<int> label_shape{batch_size_};
  top[0]->Reshape(data_shape);
  if (output_labels_) top[1]->Reshape(label_shape);

  batches_.clear();
  for (uint32_t i = 0; i < dp.prefetch(); ++i) {
    batches_.emplace_back(new Batch);
    Batch& b = *batches_.back();
    b.data.Reshape(data_shape);
    b.label.Reshape(label_shape);
    b.data.mutable_cpu_data();  // allocate now, on this thread, never in the loop
    b.label.mutable_cpu_data();
  }

  position_ = dp.rand_skip() > 0 ? Strata::draw_seed() % dp.rand_skip() : 0;
  LOG(INFO) << "Data layer '" << this->layer_param_.name() << "': " << db_->size() << " records in '"
            << dp.source() << "', batch " << top[0]->shape_string() << ", rank " << rank_ << " of " << count_
            << (position_ ? ", skipping " + std::to_string(position_) + " records" : std::string());
  StartPrefetch();
}

template <typename Dtype>
void DataLayer<Dtype>::StartPrefetch() {
  CHECK(!thread_.joinable());
  free_.reset(batches_.size());
  full_.reset(batches_.size());
  for (auto& b : batches_) free_.push(b.get());
  stop_ = false;
  error_.clear();
  thread_ = std::thread(&DataLayer<Dtype>::PrefetchLoop, this, position_);
}

template <typename Dtype>
void DataLayer<Dtype>::StopPrefetch() {
  if (!thread_.joinable()) return;
  stop_ = true;
  free_.close();
  full_.close();
  thread_.join();
}

template <typename Dtype>
void DataLayer<Dtype>::set_position(uint64_t position) {
  set_record_stream({position, seed_});
}

template <typename Dtype>
void DataLayer<Dtype>::set_record_stream(const typename Layer<Dtype>::RecordStream& stream) {
  CHECK(db_) << "set_record_stream before SetUp";
  StopPrefetch();
  position_ = stream.position;
  seed_ = stream.seed;
  StartPrefetch();
}

template <typename Dtype>
void DataLayer<Dtype>::set_shard(int rank, int count) {
  CHECK(db_) << "set_shard before SetUp";
  STRATA_REQUIRE(count > 0 && rank >= 0 && rank < count) << "bad data shard: rank " << rank << " of " << count;
  StopPrefetch();
  rank_ = rank;
  count_ = count;
  StartPrefetch();
}

template <typename Dtype>
void DataLayer<Dtype>::PrefetchLoop(uint64_t start) {
  Batch* batch = nullptr;
  try {
    auto cursor = db_->NewCursor();
    for (uint64_t next = start; !stop_; next += stride()) {
      if (!free_.pop(&batch)) return;
      batch->start = next;
      batch->error.clear();
      FillBatch(cursor.get(), batch);
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
void DataLayer<Dtype>::FillBatch(RecordCursor* cursor, Batch* batch) {
  const uint64_t first = batch->start + static_cast<uint64_t>(rank_) * batch_size_;
  // The cursor stands where this rank's previous batch ended; stepping over the other ranks' records is
  // cursor movement only.
  cursor->SeekToIndex(first % db_->size());
  const int item_count = item_shape_[0] * item_shape_[1] * item_shape_[2];
  const int crop = static_cast<int>(transformer_->param().crop_size());
  Dtype* data = batch->data.mutable_cpu_data();
  Dtype* label = batch->label.mutable_cpu_data();
  for (int i = 0; i < batch_size_; ++i, cursor->Next()) {
    if (stop_) return;
    STRATA_REQUIRE(ParseDatum(cursor->value(), &datum_)) << where(*cursor) << " is not a Datum";
    try {
      pixels_.Load(datum_, transformer_->color_mode());
      const bool fits = pixels_.channels() == item_shape_[0] &&
                        (crop ? pixels_.height() >= crop && pixels_.width() >= crop
                              : pixels_.height() == item_shape_[1] && pixels_.width() == item_shape_[2]);
      STRATA_REQUIRE(fits) << "the record is " << pixels_.channels() << " x " << pixels_.height() << " x "
                           << pixels_.width() << " but the first record makes the data " << item_shape_[0]
                           << " x " << item_shape_[1] << " x " << item_shape_[2];
      // The random crop and mirror of a record depend only on the seed and its global position.
      transformer_->Reseed(seed_ + (first + i) * 0xd1b54a32d192ed03ULL);
      transformer_->Transform(pixels_, data + static_cast<size_t>(i) * item_count);
    } catch (const Error& e) {
      STRATA_FAIL() << where(*cursor) << ": " << e.what();
    }
    if (output_labels_) label[i] = static_cast<Dtype>(datum_.label());
  }
}

template <typename Dtype>
void DataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
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
  if (output_labels_) {
    std::memcpy(top[1]->mutable_cpu_data(), batch->label.cpu_data(), sizeof(Dtype) * batch->label.count());
  }
  position_ = batch->start + stride();
  free_.push(batch);
}

STRATA_INSTANTIATE_CLASS(DataLayer);
REGISTER_LAYER_CLASS(Data);

}  // namespace strata
