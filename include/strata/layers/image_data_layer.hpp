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
#include "strata/data/converters.hpp"  // ReadImageList
#include "strata/layer.hpp"

namespace strata {


// ImageData (Caffe's): reads the images named in a list file (image_data_param.source; each path prefixed
// with root_folder as is), decodes each as BGR (is_color, the default) or one gray channel, resizes it to
// new_height x new_width when both are set, transforms it (transform_param, see DataTransformer) and emits
// top[0] = data (batch_size x C x H x W) and top[1] = label (batch_size). Needs OpenCV: without it, setup
// is an Error saying so.
//
// The first image fixes C x H x W; a later image of another size (possible without new_height/new_width)
// is an Error naming it, unless crop_size makes every image the same size.
//
// Order: the stream of images is the list repeated; global position g reads entry g mod n of epoch g / n.
// With shuffle, each epoch's order is a permutation drawn from the layer's seed and the epoch number
// (Caffe shuffles at start and at every epoch end; here the permutations depend only on the seed, drawn
// from Strata::draw_seed() at setup, so random_seed makes runs repeat). rand_skip starts at a random
// position below rand_skip (Error when that is not below the number of images, as in Caffe).
//
// Prefetch (data_param.prefetch batches ahead, default 4, as Caffe's prefetching layers), sharding, resume
// and transform randomness are as the Data layer's (see data_layer.hpp): rank r of N takes positions
// t*N*b + r*b + [0, b) of global batch t, so the N ranks' batches concatenated in rank order are the
// single-rank batch of N*b; the random crop and mirror of an image depend only on the seed and its global
// position. An image that cannot be read comes out of the next Forward as an Error
// naming the file and its line in the list (Caffe aborts there too).
template <typename Dtype>
class ImageDataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit ImageDataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}
  ~ImageDataLayer() override;

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // The tops keep the shape set up from the first image.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  const char* type() const override { return "ImageData"; }
  bool IsBatchSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }
  bool BackwardNeedsBottomData() const override { return false; }

  uint64_t position() const { return position_; }
  void set_position(uint64_t position);
  bool has_record_stream() const override { return true; }
  typename Layer<Dtype>::RecordStream record_stream() const override { return {position_, seed_}; }
  void set_record_stream(const typename Layer<Dtype>::RecordStream& stream) override;
  void set_shard(int rank, int count);
  int shard_rank() const { return rank_; }
  int shard_count() const { return count_; }
  size_t num_images() const { return lines_.size(); }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override {}

 private:
  struct Batch {
    Blob<Dtype> data;
    Blob<Dtype> label;
    uint64_t start = 0;  // global position of the global batch's first image (before this rank's offset)
    std::string error;   // set by the thread instead of data when it failed
  };

  void StartPrefetch();
  void StopPrefetch();
  void PrefetchLoop(uint64_t start);
  void FillBatch(Batch* batch);
  // The list entry read at global position g (through the epoch's permutation when shuffling).
  const ImageListEntry& EntryAt(uint64_t g);
  // Reads and decodes `entry` into pixels_; Error naming the file and the list line when it cannot.
  void LoadImage(const ImageListEntry& entry);
  // "image 'root/path' (list:line)" for messages.
  std::string where(const ImageListEntry& entry) const;
  uint64_t stride() const { return static_cast<uint64_t>(count_) * batch_size_; }

  std::vector<ImageListEntry> lines_;
  std::string source_, root_;
  int new_height_ = 0, new_width_ = 0;
  bool is_color_ = true, shuffle_ = false;
  std::unique_ptr<DataTransformer<Dtype>> transformer_;  // used by the prefetch thread only
  Datum datum_;                                          // prefetch thread only
  DatumPixels pixels_;                                   // prefetch thread only
  std::vector<size_t> order_;                            // prefetch thread only: the permutation of epoch order_epoch_
  uint64_t order_epoch_ = UINT64_MAX;
  uint64_t seed_ = 0;
  int batch_size_ = 0;
  std::vector<int> item_shape_;  // C x H x W of one transformed image
  int rank_ = 0, count_ = 1;

  std::vector<std::unique_ptr<Batch>> batches_;
  BlockingQueue<Batch*> free_, full_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  uint64_t position_ = 0;
  std::string error_;  // a failure seen by Forward; repeated by every later Forward until set_position
};

}  // namespace strata
