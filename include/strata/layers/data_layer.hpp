#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/data/blocking_queue.hpp"
#include "strata/data/data_transformer.hpp"
#include "strata/data/datum.hpp"
#include "strata/data/db.hpp"
#include "strata/layer.hpp"

namespace strata {

// Data: reads Datum records from an LMDB or a LevelDB (data_param.source and backend; with no backend given, the
// source's files decide), transforms them (transform_param, see DataTransformer)
// and emits top[0] = data (batch_size x C x H x W) and, when asked, top[1] = label (batch_size).
//
// Prefetch: a thread fills the next data_param.prefetch batches (preallocated, handed round through a
// queue of free and a queue of full batches) while the net trains on the current one; Forward copies one
// full batch into the tops. An error in the thread (a record that is not a Datum, a size mismatch) comes
// out of the next Forward as a strata::Error naming the database, the key and the record's position.
//
// Records and positions: records are numbered 0 .. n-1 in key order, and the stream of records is the
// database repeated (global position g reads record g mod n). Global batch t of the whole job covers
// positions [p0 + t*N*b, p0 + (t+1)*N*b), where b = batch_size, N = Strata::solver_count() and p0 the
// starting position (a random draw below rand_skip, or what set_position() gave).
//
// Sharding for data parallelism: rank r of N takes the r-th block of b consecutive positions of each
// global batch, i.e. positions p0 + t*N*b + r*b + [0, b). So the N ranks' batches of iteration t,
// concatenated in rank order, are exactly the batch N*b a single rank would read at iteration t, in the same
// order (Caffe 1.0 interleaves single records, r, r+N, r+2N, ...: the same set per iteration, but not the
// same order). A rank steps over the other ranks' records with the cursor alone, without decoding them.
// The random crop and mirror of a record depend only on its global position and the seed (drawn from
// Strata::draw_seed() at setup, so random_seed makes runs repeatable), so N ranks also reproduce the
// single-rank transformed values. The shard is read from Strata at setup, in TRAIN and TEST alike;
// set_shard() changes it (e.g. a TEST net evaluated on rank 0 alone).
//
// Resume: position() is the global position where the next global batch starts (records consumed by
// Forward so far, over all ranks, plus p0; never wrapped, and the same on every rank); set_position()
// restarts the prefetch thread there. record_stream() is that position with the transform seed, and
// set_record_stream() restores both, which is how a solver restores the exact stream from its solverstate.
template <typename Dtype>
class DataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit DataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}
  ~DataLayer() override;

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // The tops keep the shape set up from the first record.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  const char* type() const override { return "Data"; }
  bool IsBatchSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool BackwardNeedsBottomData() const override { return false; }

  uint64_t position() const { return position_; }
  void set_position(uint64_t position);
  bool has_record_stream() const override { return true; }
  typename Layer<Dtype>::RecordStream record_stream() const override { return {position_, seed_}; }
  void set_record_stream(const typename Layer<Dtype>::RecordStream& stream) override;
  void set_shard(int rank, int count);
  int shard_rank() const { return rank_; }
  int shard_count() const { return count_; }
  uint64_t num_records() const { return db_ ? db_->size() : 0; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override {}

 private:
  struct Batch {
    Blob<Dtype> data;
    Blob<Dtype> label;
    uint64_t start = 0;  // global position of the batch's first record (before this rank's offset)
    std::string error;   // set by the thread instead of data when it failed
  };

  void StartPrefetch();
  void StopPrefetch();
  void PrefetchLoop(uint64_t start);
  void FillBatch(RecordCursor* cursor, Batch* batch);
  // "LMDB 'path', key '...' (record k)" (or LevelDB) for messages.
  std::string where(const RecordCursor& cursor) const;
  uint64_t stride() const { return static_cast<uint64_t>(count_) * batch_size_; }

  std::unique_ptr<RecordReader> db_;
  std::unique_ptr<DataTransformer<Dtype>> transformer_;  // used by the prefetch thread only
  Datum datum_;                                          // prefetch thread only
  DatumPixels pixels_;                                   // prefetch thread only
  uint64_t seed_ = 0;
  int batch_size_ = 0;
  std::vector<int> item_shape_;  // C x H x W of one transformed record
  bool output_labels_ = false;
  int rank_ = 0, count_ = 1;

  std::vector<std::unique_ptr<Batch>> batches_;
  BlockingQueue<Batch*> free_, full_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  uint64_t position_ = 0;
  std::string error_;  // a failure seen by Forward; repeated by every later Forward until set_position
};

}  // namespace strata
