#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/layer.hpp"

namespace strata {

// HDF5Data (Caffe's HDF5DataLayer): reads rows of HDF5 datasets. hdf5_data_param.source is a text file listing
// HDF5 files, one path a line (blank lines and surrounding white space ignored). Top i is read from the dataset
// named like the top ("data" -> /data); every dataset a top reads must be float or double (converted to Dtype),
// of rank >= 1, and all of a file's datasets have the same first dimension: the file's rows. Top i is
// batch_size x (its dataset's dimensions after the first), set from the first file read; every other file must
// match. No prefetch and no transform_param, as in Caffe.
//
// The stream of rows: the files in list order, each from its first row to its last, then round again. With
// hdf5_data_param.shuffle, as in Caffe, the order of the files is shuffled at setup and at each wrap-around, and
// the order of a file's rows each time the stream enters it (or wraps around it when the list has one file).
// The shuffles come from the layer's own engine, seeded from Strata::draw_seed() at setup, so random_seed makes
// runs repeat whatever else draws from Strata::rng().
//
// Positions and sharding work as in the Data layer (data_layer.hpp): global batch t covers stream positions
// [t*N*b, (t+1)*N*b) (b = batch_size, N = data_shard().count), and shard r of N takes positions
// t*N*b + r*b + [0, b); the N ranks' batches of one iteration, concatenated in rank order, are the batch N*b one
// rank would read. A rank steps over the others' rows without reading them (a file it only steps over is opened
// for its shape alone). record_stream() is (global position, shuffle seed); set_record_stream() replays the
// shuffles up to that position, so a resumed run sees the same batches.
//
// Errors (strata::Error naming the list, the file and the dataset; HDF5's own error printing is kept quiet): a
// list that cannot be read or names no file, an HDF5 file that cannot be opened, a missing dataset, a dataset
// that is not float/double, of rank 0, with 0 rows or empty rows (another dimension 0), with rows unlike the
// file's other datasets, or with another item shape than the first file's. Those met after setup come out of
// the Forward that reaches the file, and of every later one until set_position()/set_record_stream().
template <typename Dtype>
class HDF5DataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  explicit HDF5DataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // The tops keep the shape set up from the first file.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  const char* type() const override { return "HDF5Data"; }
  bool IsBatchSource() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  bool BackwardNeedsBottomData() const override { return false; }

  uint64_t position() const { return position_; }
  void set_position(uint64_t position) { set_record_stream({position, seed_}); }
  bool has_record_stream() const override { return true; }
  typename Layer<Dtype>::RecordStream record_stream() const override { return {position_, seed_}; }
  void set_record_stream(const typename Layer<Dtype>::RecordStream& stream) override;
  void set_shard(int rank, int count);
  const std::vector<std::string>& files() const { return files_; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom) override {}

 private:
  // Back to stream position 0 with the shuffles drawn from `seed`.
  void Restart(uint64_t seed);
  // Enters file file_order_[file_pos_]: checks its datasets, shuffles its rows; reads no data.
  void EnterFile();
  // Reads the current file's datasets into rows_data_.
  void LoadFile();
  // Moves the stream `n` rows on (entering files and wrapping around as needed).
  void Advance(uint64_t n);
  std::string top_name(int i) const { return this->layer_param_.top(i); }

  std::vector<std::string> files_;  // from the list, in list order
  std::string list_;                // hdf5_data_param.source
  bool shuffle_ = false;
  int batch_size_ = 0;
  std::vector<std::vector<int>> item_shapes_;  // per top: the dataset's dimensions after the first
  std::vector<int> item_counts_;

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  uint64_t position_ = 0;       // global position of the next global batch (all ranks' rows)
  uint64_t stream_pos_ = 0;     // where the stream stands (this rank's cursor)
  std::vector<int> file_order_; // indices into files_
  size_t file_pos_ = 0;         // index into file_order_
  int rows_ = 0;                // rows of the current file
  std::vector<int> row_order_;  // the current file's rows in reading order
  int row_pos_ = 0;             // index into row_order_
  bool loaded_ = false;         // rows_data_ holds the current file
  std::string error_;           // a failure seen by Forward; repeated by every later Forward until set_position
  // Per top: the current file's dataset (a Blob, so that its size counts against MemoryTracker's limit).
  std::vector<std::unique_ptr<Blob<Dtype>>> rows_data_;
};

}  // namespace strata
