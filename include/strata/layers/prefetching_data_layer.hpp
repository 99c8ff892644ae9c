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
#include "strata/layer.hpp"

namespace strata {

// PrefetchingDataLayer: what the layers that read a stream of records share (Data, ImageData; Caffe's
// BasePrefetchingDataLayer). They emit top[0] = data (batch_size x C x H x W, the shape of the first
// transformed record) and, when asked, top[1] = label (batch_size).
//
// Prefetch: a thread fills the next `prefetch` batches (preallocated, handed round through a queue of free
// and a queue of full batches) while the net trains on the current one; Forward copies one full batch into
// the tops. An error in the thread (a record that cannot be decoded, a size mismatch) comes out of the next
// Forward as a strata::Error, and every later Forward repeats it until the stream is restarted.
//
// Positions and sharding: the stream of records is numbered by global position. Global batch t of the whole
// job covers positions [p0 + t*N*b, p0 + (t+1)*N*b), where b = batch_size, N = the shard count
// (data_shard() at setup, handed over by the Net) and p0 the starting position. Shard r takes positions
// p0 + t*N*b + r*b + [0, b), so the N ranks' batches of iteration t, concatenated in rank order, are exactly
// the batch N*b a single rank would read at iteration t. The random crop and mirror of a record depend only
// on its global position and the seed (drawn from Strata::draw_seed() at setup, so random_seed makes runs
// repeatable): N ranks reproduce the single-rank transformed values too.
//
// Resume: position() is the global position where the next global batch starts (records consumed by Forward,
// over all ranks, plus p0; the same on every rank); record_stream() is that position with the seed, and
// set_record_stream() restarts the prefetch thread there: how a solver restores the exact stream.
//
// A derived layer sets up its source, then calls StartBatches() from LayerSetUp with the shape of one
// transformed record, and fills batches in FillBatch() (on the prefetch thread). Its destructor must call
// StopPrefetch() first, so that the thread never calls into a half-destroyed object.
template <typename Dtype>
class PrefetchingDataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using typename Layer<Dtype>::RecordStream;
  explicit PrefetchingDataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}
  ~PrefetchingDataLayer() override { StopPrefetch(); }

  // The tops keep the shape set up from the first record.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  bool IsBatchSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  bool BackwardNeedsBottomData() const override { return false; }

  uint64_t position() const { return position_; }
  void set_position(uint64_t position) { set_record_stream({position, seed_}); }
  bool has_record_stream() const override { return true; }
  RecordStream record_stream() const override { return {position_, seed_}; }
  void set_record_stream(const RecordStream& stream) override;
  // Reads shard `rank` of `count` from now on (e.g. a TEST net evaluated on rank 0 alone).
  void set_shard(int rank, int count);

 protected:
  struct Batch {
    Blob<Dtype> data;
    Blob<Dtype> label;
    uint64_t start = 0;  // global position of the global batch's first record (before this rank's offset)
    std::string error;   // set by the thread instead of data when it failed
  };

  // Draws the seed; `transform` is the layer's transform_param with any V1-style fields merged in. Call first in
  // LayerSetUp.
  void SetUpStream(int batch_size, const TransformationParameter& transform);
  // Shapes the tops and `prefetch` batches for records of item_shape (C x H x W) and starts the thread at
  // position_.
  void StartBatches(const std::vector<int>& item_shape, uint32_t prefetch, const BlobVec& top);
  void StopPrefetch();

  // Fills batch->data and batch->label with this rank's records of the global batch at batch->start
  // (positions first_position(*batch) + [0, batch_size_)). Runs on the prefetch thread; returns early when
  // stop_ is set. Throws to report a bad record.
  virtual void FillBatch(Batch* batch) = 0;
  // Called on the calling thread while the prefetch thread is stopped, before it starts again from another
  // position, seed or shard: state the thread kept (a cursor, an epoch's order) is to be forgotten.
  virtual void OnRestart() {}

  uint64_t first_position(const Batch& batch) const {
    return batch.start + static_cast<uint64_t>(this->data_shard().index) * batch_size_;
  }
  // For FillBatch: "" when pixels_ has the first record's shape (or can be cropped to it), else what is wrong
  // ("is 1 x 5 x 5 but the first record makes the data 1 x 4 x 4").
  std::string ShapeMismatch() const;
  // Writes pixels_, transformed as the record at global `position` is, as item i of `batch`.
  void TransformInto(uint64_t position, Batch* batch, int i);

  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}

  std::unique_ptr<DataTransformer<Dtype>> transformer_;  // the prefetch thread's (and LayerSetUp's)
  DatumPixels pixels_;                                   // likewise
  uint64_t seed_ = 0;
  int batch_size_ = 0;
  std::vector<int> item_shape_;  // C x H x W of one transformed record
  bool output_labels_ = false;
  uint64_t position_ = 0;
  std::atomic<bool> stop_{false};

 private:
  void StartPrefetch();
  void PrefetchLoop(uint64_t start);
  uint64_t stride() const { return static_cast<uint64_t>(this->data_shard().count) * batch_size_; }

  std::vector<std::unique_ptr<Batch>> batches_;
  BlockingQueue<Batch*> free_, full_;
  std::thread thread_;
  std::string error_;  // a failure seen by Forward; repeated by every later Forward until a restart
};

}  // namespace strata
