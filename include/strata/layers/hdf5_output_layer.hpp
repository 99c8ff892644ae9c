#pragma once

#include <string>
#include <vector>

#include "strata/layer.hpp"

namespace strata {

// HDF5Output (Caffe's HDF5OutputLayer): writes its two bottoms, data and label, to the HDF5 file
// hdf5_output_param.file_name as the datasets "data" and "label" (float for a float net, double for a double
// one), for instance a net's predictions. The file is created (truncated) at setup; each Forward appends the
// batch's rows to both datasets, which are chunked and extendible along the first axis, and closes the file
// again, so after every Forward it is complete and can be read (by HDF5Data, h5py, ...). The two bottoms must
// have the same first dimension, and every batch the item shapes of the first. No tops, no backward.
template <typename Dtype>
class HDF5OutputLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit HDF5OutputLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "HDF5Output"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }
  bool BackwardNeedsBottomData() const override { return false; }

  const std::string& file_name() const { return file_name_; }
  // Rows written so far (to each dataset).
  long long rows_written() const { return rows_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override {}

 private:
  std::string file_name_;
  long long rows_ = 0;
  std::vector<std::vector<int>> item_shapes_;  // per bottom, from the first batch written
};

}  // namespace strata
