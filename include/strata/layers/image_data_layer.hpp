#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/data/converters.hpp"  // ReadImageList
#include "strata/layers/prefetching_data_layer.hpp"

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
// and transform randomness are PrefetchingDataLayer's, as for the Data layer. An image that cannot be read
// comes out of the next Forward as an Error naming the file and its line in the list (Caffe aborts there too).
template <typename Dtype>
class ImageDataLayer : public PrefetchingDataLayer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit ImageDataLayer(const LayerParameter& param) : PrefetchingDataLayer<Dtype>(param) {}
  ~ImageDataLayer() override { this->StopPrefetch(); }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "ImageData"; }
  int ExactNumTopBlobs() const override { return 2; }
  size_t num_images() const { return lines_.size(); }

 protected:
  using typename PrefetchingDataLayer<Dtype>::Batch;
  void FillBatch(Batch* batch) override;
  void OnRestart() override { order_epoch_ = UINT64_MAX; }  // the permutations follow the seed

 private:
  // The list entry read at global position g (through the epoch's permutation when shuffling).
  const ImageListEntry& EntryAt(uint64_t g);
  // Reads and decodes `entry` into pixels_; Error naming the file and the list line when it cannot.
  void LoadImage(const ImageListEntry& entry);
  // "image 'root/path' (list:line)" for messages.
  std::string where(const ImageListEntry& entry) const;

  std::vector<ImageListEntry> lines_;
  std::string source_, root_;
  int new_height_ = 0, new_width_ = 0;
  bool is_color_ = true, shuffle_ = false;
  Datum datum_;                // prefetch thread only
  std::vector<size_t> order_;  // prefetch thread only: the permutation of epoch order_epoch_
  uint64_t order_epoch_ = UINT64_MAX;
};

}  // namespace strata
