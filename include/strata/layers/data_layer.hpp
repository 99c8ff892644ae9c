#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "strata/data/db.hpp"
#include "strata/layers/prefetching_data_layer.hpp"

namespace strata {

// Data: reads Datum records from an LMDB or a LevelDB (data_param.source and backend; with no backend given, the
// source's files decide), transforms them (transform_param, see DataTransformer) and emits top[0] = data
// (batch_size x C x H x W) and, when asked, top[1] = label (batch_size). Prefetch, sharding and resume are
// PrefetchingDataLayer's; an error in a record names the database, the key and the record's position.
//
// Records and positions: records are numbered 0 .. n-1 in key order, and the stream of records is the
// database repeated (global position g reads record g mod n). The starting position is a random draw below
// rand_skip. A rank steps over the other ranks' records with the cursor alone, without decoding them. (Caffe 1.0
// interleaves single records across ranks, r, r+N, r+2N, ...: the same set per iteration, not the same order.)
template <typename Dtype>
class DataLayer : public PrefetchingDataLayer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit DataLayer(const LayerParameter& param) : PrefetchingDataLayer<Dtype>(param) {}
  ~DataLayer() override { this->StopPrefetch(); }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Data"; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  uint64_t num_records() const { return db_ ? db_->size() : 0; }

 protected:
  using typename PrefetchingDataLayer<Dtype>::Batch;
  void FillBatch(Batch* batch) override;
  void OnRestart() override { cursor_.reset(); }

 private:
  // "LMDB 'path', key '...' (record k)" (or LevelDB) for messages.
  std::string where(const RecordCursor& cursor) const;
  // Parses the record under `cursor` into pixels_ (datum_ keeps its label).
  void LoadRecord(const RecordCursor& cursor);

  std::unique_ptr<RecordReader> db_;
  std::unique_ptr<RecordCursor> cursor_;  // prefetch thread only: where this rank's last batch ended
  Datum datum_;                           // prefetch thread only
};

}  // namespace strata
