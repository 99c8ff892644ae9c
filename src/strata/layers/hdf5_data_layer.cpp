#include "strata/layers/hdf5_data_layer.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <numeric>

#include "strata/layer_factory.hpp"
#include "strata/util/hdf5_util.hpp"

namespace strata {

namespace {

// The HDF5 files a list names: one path a line, white space around it and blank lines ignored.
std::vector<std::string> ReadFileList(const std::string& list) {
  std::ifstream in(list);
  STRATA_REQUIRE(in.is_open()) << "cannot open the HDF5 file list '" << list << "' (hdf5_data_param.source)";
  std::vector<std::string> files;
  std::string line;
  while (std::getline(in, line)) {
    const size_t begin = line.find_first_not_of(" \t\r\n\f\v");
    if (begin == std::string::npos) continue;
    const size_t end = line.find_last_not_of(" \t\r\n\f\v");
    files.push_back(line.substr(begin, end - begin + 1));
  }
  STRATA_REQUIRE(!in.bad()) << "cannot read the HDF5 file list '" << list << "'";
  STRATA_REQUIRE(!files.empty()) << "the HDF5 file list '" << list << "' names no file";
  return files;
}

// One dataset's shape, checked to be a float/double array Strata can hold.
std::vector<int> DatasetShape(hid_t file, const std::string& name, const std::string& where) {
  STRATA_REQUIRE(hdf5::HasLink(file, name)) << where << " has no dataset '" << name << "'";
  hdf5::Dataset dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  STRATA_REQUIRE(dataset.ok()) << where << ": '" << name << "' is not a dataset";
  hdf5::Datatype type(H5Dget_type(dataset.get()));
  STRATA_REQUIRE(type.ok() && H5Tget_class(type.get()) == H5T_FLOAT)
      << where << ", dataset '" << name << "': not a float or double dataset";
  hdf5::Dataspace space(H5Dget_space(dataset.get()));
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  STRATA_REQUIRE(rank >= 1 && rank <= kMaxBlobAxes)
      << where << ", dataset '" << name << "': needs 1 to " << kMaxBlobAxes << " dimensions, has " << rank;
  std::vector<hsize_t> dims(rank);
  STRATA_REQUIRE(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) == rank)
      << where << ", dataset '" << name << "': cannot read its dimensions";
  std::vector<int> shape;
  for (hsize_t d : dims) {
    STRATA_REQUIRE(d <= static_cast<hsize_t>(INT_MAX)) << where << ", dataset '" << name << "': dimension " << d
                                                       << " is too large";
    shape.push_back(static_cast<int>(d));
  }
  // A compact or contiguous dataset must store all its values (a contiguous one may also store none yet: it
  // reads as its fill value). HDF5 1.10 would read past a corrupt file's short storage instead of failing.
  uint64_t bytes = H5Tget_size(type.get());
  for (hsize_t d : dims) {
    STRATA_REQUIRE(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        << where << ", dataset '" << name << "': too large";
  }
  hdf5::PropertyList create(H5Dget_create_plist(dataset.get()));
  const H5D_layout_t layout = create.ok() ? H5Pget_layout(create.get()) : H5D_LAYOUT_ERROR;
  const uint64_t stored = H5Dget_storage_size(dataset.get());
  STRATA_REQUIRE(layout == H5D_CHUNKED || layout == H5D_VIRTUAL || stored == bytes ||
                 (layout == H5D_CONTIGUOUS && stored == 0))
      << where << ", dataset '" << name << "': stores " << stored << " bytes of the " << bytes << " it needs";
  return shape;
}

std::string FileWhere(const std::string& file, const std::string& list) {
  return "HDF5 file '" + file + "' (listed in '" + list + "')";
}

}  // namespace

template <typename Dtype>
void HDF5DataLayer<Dtype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const HDF5DataParameter& hp = this->layer_param_.hdf5_data_param();
  STRATA_REQUIRE(!hp.source().empty()) << "hdf5_data_param.source (the list of HDF5 files) is not set";
  STRATA_REQUIRE(hp.batch_size() > 0 && hp.batch_size() <= INT_MAX)
      << "hdf5_data_param.batch_size must be positive, got " << hp.batch_size();
  list_ = hp.source();
  shuffle_ = hp.shuffle();
  batch_size_ = static_cast<int>(hp.batch_size());
  files_ = ReadFileList(list_);

  // The first file the stream enters sets the item shapes.
  item_shapes_.clear();
  item_counts_.clear();
  Restart(Strata::draw_seed());
  for (size_t i = 0; i < top.size(); ++i) {
    std::vector<int> shape{batch_size_};
    shape.insert(shape.end(), item_shapes_[i].begin(), item_shapes_[i].end());
    top[i]->Reshape(shape);
  }
  position_ = 0;
  LOG(INFO) << "HDF5Data layer '" << this->layer_param_.name() << "': " << files_.size() << " file(s) listed in '"
            << list_ << "', batch " << top[0]->shape_string() << (shuffle_ ? ", shuffled" : "") << ", shard "
            << this->data_shard().index << " of " << this->data_shard().count;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Restart(uint64_t seed) {
  seed_ = seed;
  rng_.seed(seed);
  file_order_.resize(files_.size());
  std::iota(file_order_.begin(), file_order_.end(), 0);
  if (shuffle_) std::shuffle(file_order_.begin(), file_order_.end(), rng_);
  file_pos_ = 0;
  stream_pos_ = 0;
  EnterFile();
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::EnterFile() {
  const std::string& path = files_[file_order_[file_pos_]];
  const std::string where = FileWhere(path, list_);
  loaded_ = false;
  rows_ = 0;
  hdf5::QuietErrors quiet;
  hdf5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << "cannot open " << where;
  const bool first = item_shapes_.empty();
  for (int i = 0; i < this->layer_param_.top_size(); ++i) {
    std::vector<int> shape = DatasetShape(file.get(), top_name(i), where);
    const int rows = shape[0];
    shape.erase(shape.begin());
    if (i == 0) {
      STRATA_REQUIRE(rows > 0) << where << ", dataset '" << top_name(i) << "': has 0 rows";
      rows_ = rows;
    } else {
      STRATA_REQUIRE(rows == rows_) << where << ": dataset '" << top_name(i) << "' has " << rows
                                    << " rows but dataset '" << top_name(0) << "' has " << rows_;
    }
    STRATA_REQUIRE(std::find(shape.begin(), shape.end(), 0) == shape.end())
        << where << ", dataset '" << top_name(i) << "': its rows are empty (a dimension of 0)";
    if (first) {
      long long count = 1;
      for (int d : shape) count *= d;  // each d <= INT_MAX and at most INT_MAX rows * count: Blob checks the rest
      STRATA_REQUIRE(count * batch_size_ <= INT_MAX)
          << where << ", dataset '" << top_name(i) << "': a batch of " << batch_size_ << " rows is too large";
      item_shapes_.push_back(shape);
      item_counts_.push_back(static_cast<int>(count));
    } else {
      STRATA_REQUIRE(shape == item_shapes_[i])
          << where << ", dataset '" << top_name(i) << "': its rows do not have the shape of the first file's";
    }
  }
  row_order_.resize(rows_);
  std::iota(row_order_.begin(), row_order_.end(), 0);
  if (shuffle_) std::shuffle(row_order_.begin(), row_order_.end(), rng_);
  row_pos_ = 0;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::LoadFile() {
  const std::string& path = files_[file_order_[file_pos_]];
  const std::string where = FileWhere(path, list_);
  hdf5::QuietErrors quiet;
  hdf5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  STRATA_REQUIRE(file.ok()) << "cannot open " << where;
  rows_data_.resize(this->layer_param_.top_size());
  for (int i = 0; i < this->layer_param_.top_size(); ++i) {
    // The file may have changed since EnterFile checked it: check again.
    std::vector<int> shape = DatasetShape(file.get(), top_name(i), where);
    std::vector<int> expected{rows_};
    expected.insert(expected.end(), item_shapes_[i].begin(), item_shapes_[i].end());
    STRATA_REQUIRE(shape == expected) << where << ", dataset '" << top_name(i) << "' changed while being read";
    if (!rows_data_[i]) rows_data_[i].reset(new Blob<Dtype>());
    rows_data_[i]->Reshape(shape);
    hdf5::Dataset dataset(H5Dopen2(file.get(), top_name(i).c_str(), H5P_DEFAULT));
    STRATA_REQUIRE(dataset.ok() && H5Dread(dataset.get(), hdf5::MemoryType<Dtype>(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                           rows_data_[i]->mutable_cpu_data()) >= 0)
        << where << ", dataset '" << top_name(i) << "': cannot read it";
  }
  loaded_ = true;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Advance(uint64_t n) {
  while (n > 0) {
    const uint64_t step = std::min<uint64_t>(n, static_cast<uint64_t>(rows_ - row_pos_));
    row_pos_ += static_cast<int>(step);
    stream_pos_ += step;
    n -= step;
    if (row_pos_ < rows_) break;
    // The end of a file: on to the next one (new file order at a wrap-around), or round this one again.
    if (files_.size() > 1) {
      if (++file_pos_ == files_.size()) {
        file_pos_ = 0;
        if (shuffle_) std::shuffle(file_order_.begin(), file_order_.end(), rng_);
      }
      EnterFile();
    } else {
      row_pos_ = 0;
      if (shuffle_) std::shuffle(row_order_.begin(), row_order_.end(), rng_);
    }
  }
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::set_record_stream(const typename Layer<Dtype>::RecordStream& stream) {
  STRATA_REQUIRE(!files_.empty()) << "set_record_stream before SetUp";
  error_.clear();
  Restart(stream.seed);
  position_ = stream.position;
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::set_shard(int rank, int count) {
  this->set_data_shard({rank, count});
}

template <typename Dtype>
void HDF5DataLayer<Dtype>::Forward_cpu(const BlobVec& bottom, const BlobVec& top) {
  // After a failure the stream stands half-way; every later Forward repeats it until set_record_stream.
  if (!error_.empty()) STRATA_FAIL() << this->describe() << ": " << error_;
  try {
    const uint64_t first = position_ + static_cast<uint64_t>(this->data_shard().index) * batch_size_;
    // Shuffles happen in stream order, so a stream that is past `first` (set_shard to a lower rank) replays.
    if (stream_pos_ > first) Restart(seed_);
    Advance(first - stream_pos_);
    for (int r = 0; r < batch_size_; ++r) {
      if (!loaded_) LoadFile();
      const int row = row_order_[row_pos_];
      for (size_t i = 0; i < top.size(); ++i) {
        const size_t n = item_counts_[i];
        std::memcpy(top[i]->mutable_cpu_data() + r * n, rows_data_[i]->cpu_data() + row * n, n * sizeof(Dtype));
      }
      Advance(1);
    }
  } catch (const Error& e) {
    error_ = e.what();
    STRATA_FAIL() << this->describe() << ": " << error_;
  }
  position_ += static_cast<uint64_t>(this->data_shard().count) * batch_size_;
}

STRATA_INSTANTIATE_CLASS(HDF5DataLayer);
REGISTER_LAYER_CLASS(HDF5Data);

}  // namespace strata
