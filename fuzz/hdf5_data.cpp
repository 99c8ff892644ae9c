// HDF5Data's reading of well-formed HDF5 files with every shape, type, layout and naming an input can choose:
// the input is decoded into a file list (up to 3 files, a missing one, blank lines) and each file's datasets
// (named like the tops or not; float, double, integer, or a group where a dataset is expected; 0 to 5 dimensions
// of 0 to 4 each; contiguous, chunked or compact; values from the input, NaN and infinity included), written
// with the HDF5 API; then an HDF5Data layer with 1 to 3 tops, a batch of 0 to 5, shuffled or not, is set up,
// run forward and resumed at a drawn position. fuzz/make_seeds.sh writes seeds in this encoding.
//
// Corrupt HDF5 bytes are not fuzzed here: libhdf5 1.10 itself crashes on some (fuzz/README.md), which Strata
// cannot catch. What this target checks is Strata's own logic over what libhdf5 hands it.
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "strata/layer_factory.hpp"
#include "strata/util/io.hpp"

namespace {

// Reads the input front to back; past its end every read is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  int below(int n) { return next() % n; }
  float value() {
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits = bits << 8 | next();
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

const char* const kNames[] = {"data", "label", "extra", "data2"};

// One dataset (or, for kind 5, a group under a dataset's name) in `file`.
void WriteDataset(hid_t file, Bytes& in) {
  const char* name = kNames[in.below(4)];
  const int kind = in.below(6);  // 0-1 float, 2 double, 3 int32, 4 int8, 5 a group
  if (H5Lexists(file, name, H5P_DEFAULT) > 0) return;
  if (kind == 5) {
    const hid_t group = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (group >= 0) H5Gclose(group);
    return;
  }
  const int rank = in.below(6);
  hsize_t dims[5];
  hsize_t count = 1;
  for (int d = 0; d < rank; ++d) count *= dims[d] = in.below(5);
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr);
  const hid_t type = kind <= 1 ? H5T_NATIVE_FLOAT
                     : kind == 2 ? H5T_NATIVE_DOUBLE
                     : kind == 3 ? H5T_NATIVE_INT32
                                 : H5T_NATIVE_INT8;
  const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
  const int layout = in.below(3);
  if (layout == 1 && rank > 0 && count > 0) {
    hsize_t chunk[5];
    for (int d = 0; d < rank; ++d) chunk[d] = 1 + in.below(static_cast<int>(dims[d]));
    H5Pset_chunk(create, rank, chunk);
  } else if (layout == 2) {
    H5Pset_layout(create, H5D_COMPACT);
  }
  const hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, create, H5P_DEFAULT);
  if (dataset >= 0) {
    // Values as doubles, converted by HDF5 into the dataset's type; some datasets are left unwritten (their
    // fill value).
    if (in.below(4) != 0 && count > 0) {
      std::vector<double> values(count);
      for (double& v : values) v = in.value();
      H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    }
    H5Dclose(dataset);
  }
  H5Pclose(create);
  H5Sclose(space);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = strata::fuzz::TempDir("hdf5_data");
  static const bool quiet = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)quiet;
  Bytes in(data, size);

  // The files and the list naming them.
  const std::string list = dir + "/list.txt";
  std::ofstream names(list, std::ios::trunc);
  const int files = 1 + in.below(3);
  for (int f = 0; f < files; ++f) {
    const std::string path = dir + "/file" + std::to_string(f) + ".h5";
    std::remove(path.c_str());
    if (in.below(8) == 0) names << "\n  \t\n";      // blank lines are skipped
    names << "  " << path << (in.below(2) ? "\t\n" : "\n");
    if (in.below(10) == 0) continue;               // listed but never written: a missing file
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) continue;
    const int datasets = in.below(4);
    for (int d = 0; d < datasets; ++d) WriteDataset(file, in);
    H5Fclose(file);
  }
  names.close();

  strata::LayerParameter param;
  param.set_name("hdf5");
  param.set_type("HDF5Data");
  const int tops = 1 + in.below(3);
  for (int t = 0; t < tops; ++t) param.add_top(kNames[in.below(4)]);
  param.mutable_hdf5_data_param()->set_source(list);
  const int batch = in.below(8);  // 0 (refused) only when asked for: short inputs read zeros, batch 1
  param.mutable_hdf5_data_param()->set_batch_size(batch == 7 ? 0 : 1 + batch % 5);
  param.mutable_hdf5_data_param()->set_shuffle(in.below(2));
  try {
    auto layer = strata::LayerRegistry<float>::CreateLayer(param);
    std::vector<std::unique_ptr<strata::Blob<float>>> owned;
    std::vector<strata::Blob<float>*> top;
    for (int t = 0; t < tops; ++t) {
      owned.emplace_back(new strata::Blob<float>());
      top.push_back(owned.back().get());
    }
    layer->SetUp({}, top);
    const int forwards = 1 + in.below(4);
    for (int i = 0; i < forwards; ++i) layer->Forward({}, top);
    auto stream = layer->record_stream();
    stream.position += in.below(16);
    layer->set_record_stream(stream);
    layer->Forward({}, top);
  } catch (const strata::Error&) {
  }
  return 0;
}
