#include "strata/layers/hdf5_output_layer.hpp"

#include <algorithm>

#include "strata/layer_factory.hpp"
#include "strata/util/hdf5_util.hpp"

namespace strata {

namespace {

const char* const kDatasetNames[2] = {"data", "label"};

// Appends `rows` rows of `values` (row shape `item`) to the extendible dataset `name`, creating it when
// `rows_before` is 0.
template <typename Dtype>
void AppendRows(hid_t file, const char* name, const std::vector<int>& item, long long rows_before, int rows,
                const Dtype* values, const std::string& where) {
  const int rank = static_cast<int>(item.size()) + 1;
  // Chunks of whole rows, about a million values at most (HDF5 refuses chunks of 4 GiB).
  long long item_count = 1;
  for (int d : item) item_count *= std::max(d, 1);
  const long long chunk_rows = std::max(1LL, std::min<long long>(std::max(rows, 1), (1LL << 20) / item_count));
  std::vector<hsize_t> dims{static_cast<hsize_t>(rows_before + rows)}, chunk{static_cast<hsize_t>(chunk_rows)},
      max_dims{H5S_UNLIMITED};
  for (int d : item) {
    dims.push_back(d);
    chunk.push_back(std::max(d, 1));
    max_dims.push_back(d);
  }
  auto create_or_open = [&]() -> hid_t {
    if (rows_before > 0) return H5Dopen2(file, name, H5P_DEFAULT);
    hdf5::Dataspace space(H5Screate_simple(rank, dims.data(), max_dims.data()));
    hdf5::PropertyList create(H5Pcreate(H5P_DATASET_CREATE));
    STRATA_REQUIRE(space.ok() && create.ok() && H5Pset_chunk(create.get(), rank, chunk.data()) >= 0)
        << where << ": cannot lay out dataset '" << name << "'";
    return H5Dcreate2(file, name, hdf5::MemoryType<Dtype>(), space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT);
  };
  hdf5::Dataset dataset(create_or_open());
  STRATA_REQUIRE(dataset.ok()) << where << ": cannot create or open dataset '" << name << "'";
  STRATA_REQUIRE(H5Dset_extent(dataset.get(), dims.data()) >= 0) << where << ": cannot extend dataset '" << name << "'";
  if (rows == 0) return;
  // Select the new rows in the file and write the batch there.
  hdf5::Dataspace file_space(H5Dget_space(dataset.get()));
  std::vector<hsize_t> start(rank, 0), count = dims;
  start[0] = static_cast<hsize_t>(rows_before);
  count[0] = static_cast<hsize_t>(rows);
  hdf5::Dataspace memory_space(H5Screate_simple(rank, count.data(), nullptr));
  STRATA_REQUIRE(file_space.ok() && memory_space.ok() &&
                 H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                                     nullptr) >= 0 &&
                 H5Dwrite(dataset.get(), hdf5::MemoryType<Dtype>(), memory_space.get(), file_space.get(),
                          H5P_DEFAULT, values) >= 0)
      << where << ": cannot write to dataset '" << name << "'";
}

}  // namespace

template <typename Dtype>
void HDF5OutputLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  file_name_ = this->layer_param_.hdf5_output_param().file_name();
  STRATA_REQUIRE(!file_name_.empty()) << "hdf5_output_param.file_name (the HDF5 file to write) is not set";
  hdf5::QuietErrors quiet;
  hdf5::File file(H5Fcreate(file_name_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << "cannot create the HDF5 file '" << file_name_ << "' (hdf5_output_param.file_name)";
  rows_ = 0;
  item_shapes_.clear();
}

template <typename Dtype>
void HDF5OutputLayer<Dtype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (int i = 0; i < 2; ++i) {
    STRATA_REQUIRE(bottom[i]->num_axes() >= 1)
        << this->describe() << ": bottom '" << kDatasetNames[i] << "' needs at least one axis (the rows)";
  }
  STRATA_REQUIRE(bottom[0]->shape(0) == bottom[1]->shape(0))
      << this->describe() << ": data and label must have the same number of rows, got " << bottom[0]->shape_string()
      << " and " << bottom[1]->shape_string();
  for (int i = 0; i < 2 && !item_shapes_.empty(); ++i) {
    const std::vector<int> item(bottom[i]->shape().begin() + 1, bottom[i]->shape().end());
    STRATA_REQUIRE(item == item_shapes_[i])
        << this->describe() << ": bottom '" << kDatasetNames[i] << "' is " << bottom[i]->shape_string()
        << " but the rows already written to '" << file_name_ << "' have another shape";
  }
}

template <typename Dtype>
void HDF5OutputLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  if (item_shapes_.empty()) {
    for (int i = 0; i < 2; ++i) item_shapes_.emplace_back(bottom[i]->shape().begin() + 1, bottom[i]->shape().end());
  }
  Reshape(bottom, top);  // the shapes may have changed since the net's Reshape
  const std::string where = "HDF5 file '" + file_name_ + "'";
  hdf5::QuietErrors quiet;
  hdf5::File file(H5Fopen(file_name_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << this->describe() << ": cannot open " << where << " to append to it";
  const int rows = bottom[0]->shape(0);
  try {
    for (int i = 0; i < 2; ++i) {
      AppendRows(file.get(), kDatasetNames[i], item_shapes_[i], rows_, rows, bottom[i]->cpu_data(), where);
    }
  } catch (const Error& e) {
    STRATA_FAIL() << this->describe() << ": " << e.what();
  }
  STRATA_REQUIRE(H5Fflush(file.get(), H5F_SCOPE_LOCAL) >= 0) << this->describe() << ": cannot flush " << where;
  rows_ += rows;
}

STRATA_INSTANTIATE_CLASS(HDF5OutputLayer);
REGISTER_LAYER_CLASS(HDF5Output);

}  // namespace strata
