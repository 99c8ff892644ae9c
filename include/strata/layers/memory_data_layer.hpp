#pragma once

#include <vector>

#include "strata/layer.hpp"

namespace strata {

// MemoryData (Caffe's): hands out batches of data the caller keeps in memory. memory_data_param gives
// batch_size, channels, height and width (all positive); top[0] = data (batch_size x channels x height x
// width), top[1] = label (batch_size).
//
// Reset(data, labels, n) points the layer at n examples (n a multiple of batch_size): data holds
// n x channels x height x width values, labels n values. The caller keeps both alive while the layer uses
// them; nothing is copied at Reset. Each Forward copies the next batch_size examples into the tops and
// wraps round to the first after the last. Forward before Reset is an Error. No transform is applied
// (as Caffe's Reset path).
template <typename Dtype>
class MemoryDataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit MemoryDataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "MemoryData"; }
  bool IsBatchSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }
  bool BackwardNeedsBottomData() const override { return false; }

  // Error when data or labels is null or n is not a positive multiple of batch_size.
  void Reset(Dtype* data, Dtype* labels, int n);
  // Changes the batch size (Layer::Forward reshapes the tops to it). Error while the current data, given
  // since the last Forward, has not been consumed, or when new_size does not divide n of that data.
  void set_batch_size(int new_size);

  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override {}

 private:
  int batch_size_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int size_ = 0;  // values per example: channels x height x width
  Dtype* data_ = nullptr;
  Dtype* labels_ = nullptr;
  int n_ = 0;    // examples given to Reset
  int pos_ = 0;  // the next batch's first example
  bool has_new_data_ = false;
};

}  // namespace strata
