#include "strata/layers/data_layer.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
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
std::string DataLayer<Dtype>::where(const RecordCursor& cursor) const {
  std::ostringstream s;
  s << db_->backend() << " '" << db_->path() << "', " << cursor.describe_key() << " (record " << cursor.index() << ")";
  return s.str();
}

template <typename Dtype>
void DataLayer<Dtype>::LoadRecord(const RecordCursor& cursor) {
  STRATA_REQUIRE(ParseDatum(cursor.value(), &datum_)) << where(cursor) << " is not a Datum";
  try {
    this->pixels_.Load(datum_, this->transformer_->color_mode());
  } catch (const Error& e) {
    STRATA_FAIL() << where(cursor) << ": " << e.what();
  }
}

template <typename Dtype>
void DataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DataParameter& dp = this->layer_param_.data_param();
  STRATA_REQUIRE(!dp.source().empty()) << "data_param.source (the database to read) is not set";
  STRATA_REQUIRE(dp.batch_size() > 0) << "data_param.batch_size must be positive, got " << dp.batch_size();
  this->SetUpStream(static_cast<int>(dp.batch_size()), MergedTransformParam(this->layer_param_));
  db_ = OpenRecords(dp.source(), Backend(dp));

  // The first record sets the shape of every record (a crop may take same-channel records of any size
  // at least crop_size).
  std::vector<int> item_shape;
  {
    auto cursor = db_->NewCursor();
    LoadRecord(*cursor);
    try {
      item_shape = this->transformer_->OutputShape(this->pixels_.channels(), this->pixels_.height(),
                                                   this->pixels_.width());
    } catch (const Error& e) {
      STRATA_FAIL() << where(*cursor) << ": " << e.what();
    }
  }
  this->position_ = dp.rand_skip() > 0 ? Strata::draw_seed() % dp.rand_skip() : 0;
  this->StartBatches(item_shape, dp.prefetch(), top);
  LOG(INFO) << "Data layer '" << this->layer_param_.name() << "': " << db_->size() << " records in '"
            << dp.source() << "', batch " << top[0]->shape_string() << ", shard " << this->data_shard().index << " of "
            << this->data_shard().count
            << (this->position_ ? ", skipping " + std::to_string(this->position_) + " records" : std::string());
}

template <typename Dtype>
void DataLayer<Dtype>::FillBatch(Batch* batch) {
  if (!cursor_) cursor_ = db_->NewCursor();
  const uint64_t first = this->first_position(*batch);
  // The cursor stands where this rank's previous batch ended; stepping over the other ranks' records is
  // cursor movement only.
  cursor_->SeekToIndex(first % db_->size());
  Dtype* label = batch->label.mutable_cpu_data();
  for (int i = 0; i < this->batch_size_; ++i, cursor_->Next()) {
    if (this->stop_) return;
    LoadRecord(*cursor_);
    try {
      const std::string mismatch = this->ShapeMismatch();
      STRATA_REQUIRE(mismatch.empty()) << "the record " << mismatch;
      this->TransformInto(first + i, batch, i);
    } catch (const Error& e) {
      STRATA_FAIL() << where(*cursor_) << ": " << e.what();
    }
    if (this->output_labels_) label[i] = static_cast<Dtype>(datum_.label());
  }
}

STRATA_INSTANTIATE_CLASS(DataLayer);
REGISTER_LAYER_CLASS(Data);

}  // namespace strata
