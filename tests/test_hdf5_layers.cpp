// HDF5Data and HDF5Output: the input files are written here with the HDF5 C API.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>

#include "data_test_util.hpp"
#include "strata/layers/hdf5_data_layer.hpp"
#include "strata/layers/hdf5_output_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::TempDir;

// A dataset to write: its name, shape, values and the type it is stored as in the file.
struct DatasetSpec {
  std::string name;
  std::vector<hsize_t> shape;
  std::vector<double> values;
  hid_t file_type = H5T_IEEE_F32LE;
};

void WriteH5(const std::string& path, const std::vector<DatasetSpec>& datasets) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  for (const DatasetSpec& d : datasets) {
    const hid_t space = H5Screate_simple(static_cast<int>(d.shape.size()), d.shape.data(), nullptr);
    const hid_t set = H5Dcreate2(file, d.name.c_str(), d.file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(set, 0) << d.name;
    if (!d.values.empty()) {
      ASSERT_GE(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()), 0);
    }
    H5Dclose(set);
    H5Sclose(space);
  }
  H5Fclose(file);
}

// Rows first .. first+rows-1 of the test stream: row v has data (v, v + 0.5) and label v.
void WriteRows(const std::string& path, int first, int rows, hid_t data_type = H5T_IEEE_F32LE) {
  DatasetSpec data{"data", {static_cast<hsize_t>(rows), 2}, {}, data_type};
  DatasetSpec label{"label", {static_cast<hsize_t>(rows)}, {}, H5T_IEEE_F64LE};
  for (int v = first; v < first + rows; ++v) {
    data.values.push_back(v);
    data.values.push_back(v + 0.5);
    label.values.push_back(v);
  }
  WriteH5(path, {data, label});
}

void WriteList(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

LayerParameter HDF5DataParam(const std::string& source, int batch, bool shuffle = false) {
  LayerParameter p;
  p.set_name("h5");
  p.set_type("HDF5Data");
  p.add_top("data");
  p.add_top("label");
  p.mutable_hdf5_data_param()->set_source(source);
  p.mutable_hdf5_data_param()->set_batch_size(batch);
  p.mutable_hdf5_data_param()->set_shuffle(shuffle);
  return p;
}


// A layer set up with its two tops, seeded so that runs repeat.
template <typename Dtype = double>
struct HDF5DataUnderTest {
  explicit HDF5DataUnderTest(const LayerParameter& p, uint64_t seed = 1, int rank = 0, int count = 1)
      : layer(new HDF5DataLayer<Dtype>(p)) {
    layer->set_data_shard({rank, count});
    Strata::set_random_seed(seed);
    layer->SetUp({}, tops());
  }
  std::vector<Blob<Dtype>*> tops() { return {&data, &label}; }
  // One Forward; returns the labels (the row ids), checking each row's data against its label.
  std::vector<int> Next() {
    layer->Forward({}, tops());
    std::vector<int> ids;
    for (int i = 0; i < label.count(); ++i) {
      const Dtype v = label.cpu_data()[i];
      EXPECT_EQ(data.cpu_data()[2 * i], v);
      EXPECT_EQ(data.cpu_data()[2 * i + 1], v + Dtype(0.5));
      ids.push_back(static_cast<int>(v));
    }
    return ids;
  }
  Blob<Dtype> data, label;
  std::unique_ptr<HDF5DataLayer<Dtype>> layer;
};

// Two files, rows 0-2 and 3-6, listed with a blank line and spaces between them.
struct TwoFiles {
  TwoFiles() {
    WriteRows(dir / "a.h5", 0, 3);
    WriteRows(dir / "b.h5", 3, 4, H5T_IEEE_F64LE);
    WriteList(list(), dir / "a.h5" + "\n\n  " + dir / "b.h5" + "  \n");
  }
  std::string list() const { return dir / "list.txt"; }
  TempDir dir;
};

TEST(HDF5DataLayer, BatchesSpanFilesAndWrapAround) {
  TwoFiles files;
  HDF5DataUnderTest<double> d(HDF5DataParam(files.list(), 3));
  EXPECT_EQ(d.layer->files().size(), 2u);
  EXPECT_EQ(d.data.shape(), (std::vector<int>{3, 2}));
  EXPECT_EQ(d.label.shape(), (std::vector<int>{3}));
  const std::vector<std::vector<int>> expected{{0, 1, 2}, {3, 4, 5}, {6, 0, 1}, {2, 3, 4}, {5, 6, 0}};
  for (size_t t = 0; t < expected.size(); ++t) {
    EXPECT_EQ(d.Next(), expected[t]) << "batch " << t;
    EXPECT_EQ(d.layer->position(), 3u * (t + 1));
  }
  // Float, with the float and double datasets converted; one file wrapping round itself.
  WriteList(files.dir / "one.txt", files.dir / "a.h5");
  HDF5DataUnderTest<float> f(HDF5DataParam(files.dir / "one.txt", 2));
  const std::vector<std::vector<int>> expected_one{{0, 1}, {2, 0}, {1, 2}};
  for (const auto& e : expected_one) EXPECT_EQ(f.Next(), e);
}

TEST(HDF5DataLayer, ItemShapesComeFromTheDatasets) {
  TempDir dir;
  DatasetSpec data{"data", {2, 2, 1, 3}, {}, H5T_IEEE_F32LE};
  for (int i = 0; i < 12; ++i) data.values.push_back(i);
  WriteH5(dir / "x.h5", {data, DatasetSpec{"extra", {2, 5}, std::vector<double>(10, 0.0)}});
  WriteList(dir / "list", dir / "x.h5");
  LayerParameter p = HDF5DataParam(dir / "list", 3);
  p.clear_top();
  p.add_top("data");
  HDF5DataLayer<float> layer(p);
  Blob<float> top;
  layer.SetUp({}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{3, 2, 1, 3}));
  layer.Forward({}, {&top});
  const std::vector<float> got(top.cpu_data(), top.cpu_data() + top.count());
  EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5}));  // rows 0, 1, 0
}

TEST(HDF5DataLayer, ShuffleRepeatsWithTheSeedAndKeepsFilesTogether) {
  TwoFiles files;
  // A batch of 7 is one pass over both files: every row once, each file's rows together.
  auto run = [&](uint64_t seed) {
    HDF5DataUnderTest<double> d(HDF5DataParam(files.list(), 7, true), seed);
    std::vector<std::vector<int>> batches;
    for (int t = 0; t < 6; ++t) {
      std::vector<int> b = d.Next();
      const bool a_first = b[0] < 3;
      for (int i = 0; i < 7; ++i) EXPECT_EQ(b[i] < 3, a_first ? i < 3 : i >= 4) << "batch " << t << " row " << i;
      std::vector<int> sorted = b;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
      batches.push_back(b);
    }
    return batches;
  };
  const auto first = run(5);
  EXPECT_EQ(run(5), first);
  std::set<std::vector<int>> orders(first.begin(), first.end());
  EXPECT_GT(orders.size(), 1u) << "the order never changed";
  EXPECT_NE(run(6), first);
}

TEST(HDF5DataLayer, ShardsConcatenateToTheSingleRankBatch) {
  TwoFiles files;
  const int b = 2;
  for (bool shuffle : {false, true}) {
    for (int n_ranks : {2, 3}) {
      HDF5DataUnderTest<double> single(HDF5DataParam(files.list(), n_ranks * b, shuffle), 42);
      std::vector<std::unique_ptr<HDF5DataUnderTest<double>>> ranks;
      for (int r = 0; r < n_ranks; ++r) {
        ranks.emplace_back(new HDF5DataUnderTest<double>(HDF5DataParam(files.list(), b, shuffle), 42, r, n_ranks));
      }
      EXPECT_EQ(ranks[1]->layer->data_shard().index, 1);
      EXPECT_EQ(ranks[1]->layer->data_shard().count, n_ranks);
      for (int t = 0; t < 9; ++t) {  // several passes over 7 rows
        const std::vector<int> whole = single.Next();
        std::vector<int> parts;
        for (auto& r : ranks) {
          const std::vector<int> part = r->Next();
          parts.insert(parts.end(), part.begin(), part.end());
          EXPECT_EQ(r->layer->position(), single.layer->position());
        }
        ASSERT_EQ(parts, whole) << n_ranks << " ranks, shuffle " << shuffle << ", iteration " << t;
      }
    }
  }
}

TEST(HDF5DataLayer, RecordStreamResumesExactly) {
  TwoFiles files;
  HDF5DataUnderTest<double> a(HDF5DataParam(files.list(), 3, true), 9);
  a.Next();
  const auto stream = a.layer->record_stream();
  EXPECT_EQ(stream.position, 3u);
  std::vector<std::vector<int>> rest;
  for (int t = 0; t < 5; ++t) rest.push_back(a.Next());
  HDF5DataUnderTest<double> b(HDF5DataParam(files.list(), 3, true), 123);
  b.layer->set_record_stream(stream);
  for (int t = 0; t < 5; ++t) EXPECT_EQ(b.Next(), rest[t]) << "batch " << t;
  // Back to an earlier position on the same layer.
  b.layer->set_position(3);
  EXPECT_EQ(b.Next(), rest[0]);
}

// Runs `fn`, expecting a strata::Error containing every one of `parts`, and nothing from HDF5 on stderr.
template <typename Fn>
void ExpectQuietError(Fn fn, const std::vector<std::string>& parts) {
  testing::internal::CaptureStderr();
  ExpectErrorContaining(fn, parts);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("HDF5-DIAG"), std::string::npos) << err;
}

TEST(HDF5DataLayer, BadInputIsRefusedClearly) {
  TempDir dir;
  auto setup = [](const LayerParameter& p) { HDF5DataUnderTest<float> d(p); };
  auto list_of = [&](const std::string& name, const std::string& text) {
    WriteList(dir / name, text);
    return dir / name;
  };
  WriteRows(dir / "good.h5", 0, 3);

  ExpectQuietError([&] { setup(HDF5DataParam(dir / "absent.txt", 2)); }, {"cannot open", dir / "absent.txt"});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("empty.txt", "\n  \n\n"), 2)); },
                   {dir / "empty.txt", "names no file"});
  const std::string missing_file = list_of("missing.txt", dir / "good.h5\n" + dir / "nope.h5\n");
  HDF5DataUnderTest<float> opened(HDF5DataParam(missing_file, 2));  // the first file is fine
  opened.Next();
  for (int again = 0; again < 2; ++again) {
    ExpectQuietError([&] { opened.Next(); }, {"layer 'h5' (HDF5Data)", "cannot open", dir / "nope.h5", missing_file});
  }
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("only_missing.txt", dir / "nope.h5"), 2)); },
                   {"cannot open", dir / "nope.h5"});

  WriteH5(dir / "nolabel.h5", {DatasetSpec{"data", {3, 2}, std::vector<double>(6, 1.0)}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("nolabel.txt", dir / "nolabel.h5"), 2)); },
                   {dir / "nolabel.h5", "no dataset 'label'"});

  WriteH5(dir / "rows.h5",
          {DatasetSpec{"data", {3, 2}, std::vector<double>(6, 1.0)}, DatasetSpec{"label", {4}, {1, 2, 3, 4}}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("rows.txt", dir / "rows.h5"), 2)); },
                   {dir / "rows.h5", "'label' has 4 rows", "'data' has 3"});

  WriteH5(dir / "int.h5", {DatasetSpec{"data", {3, 2}, std::vector<double>(6, 1.0), H5T_STD_I32LE},
                           DatasetSpec{"label", {3}, {1, 2, 3}}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("int.txt", dir / "int.h5"), 2)); },
                   {dir / "int.h5", "dataset 'data'", "not a float or double"});

  WriteH5(dir / "zero.h5", {DatasetSpec{"data", {0, 2}, {}}, DatasetSpec{"label", {0}, {}}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("zero.txt", dir / "zero.h5"), 2)); },
                   {dir / "zero.h5", "dataset 'data'", "0 rows"});

  WriteH5(dir / "flat.h5", {DatasetSpec{"data", {3, 0}, {}}, DatasetSpec{"label", {3}, {1, 2, 3}}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("flat.txt", dir / "flat.h5"), 2)); },
                   {dir / "flat.h5", "dataset 'data'", "empty"});

  WriteH5(dir / "scalar.h5", {DatasetSpec{"data", {}, {1.0}}, DatasetSpec{"label", {1}, {1}}});
  ExpectQuietError([&] { setup(HDF5DataParam(list_of("scalar.txt", dir / "scalar.h5"), 2)); },
                   {dir / "scalar.h5", "dataset 'data'", "dimensions"});

  WriteH5(dir / "wide.h5",
          {DatasetSpec{"data", {2, 3}, std::vector<double>(6, 1.0)}, DatasetSpec{"label", {2}, {1, 2}}});
  HDF5DataUnderTest<float> other_shape(HDF5DataParam(list_of("wide.txt", dir / "good.h5\n" + dir / "wide.h5"), 3));
  ExpectQuietError([&] { other_shape.Next(); }, {dir / "wide.h5", "dataset 'data'", "shape of the first file"});

  const std::string good = list_of("good.txt", dir / "good.h5");
  ExpectQuietError([&] { setup(HDF5DataParam(good, 0)); }, {"batch_size"});
  ExpectQuietError([&] { setup(HDF5DataParam("", 2)); }, {"source"});

  // Through a Net the message also names the layer.
  NetParameter net;
  *net.add_layer() = HDF5DataParam(dir / "nolabel.txt", 2);
  ExpectQuietError([&] { Net<float> n(net); }, {"layer 'h5' (HDF5Data)", "no dataset 'label'"});
}

LayerParameter HDF5OutputParam(const std::string& file) {
  LayerParameter p;
  p.set_name("out");
  p.set_type("HDF5Output");
  p.add_bottom("data");
  p.add_bottom("label");
  p.mutable_hdf5_output_param()->set_file_name(file);
  return p;
}

TEST(HDF5OutputLayer, AppendsEachBatchReadableByHDF5Data) {
  TempDir dir;
  const std::string out = dir / "out.h5";
  HDF5OutputLayer<float> layer(HDF5OutputParam(out));
  Blob<float> data(std::vector<int>{2, 2}), label(std::vector<int>{2});
  const std::vector<Blob<float>*> bottom{&data, &label};
  layer.SetUp(bottom, {});
  WriteList(dir / "list", out);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 2; ++i) {
      const float v = 2 * t + i;
      data.mutable_cpu_data()[2 * i] = v;
      data.mutable_cpu_data()[2 * i + 1] = v + 0.5f;
      label.mutable_cpu_data()[i] = v;
    }
    layer.Forward(bottom, {});
    EXPECT_EQ(layer.rows_written(), 2 * (t + 1));
    // Complete after every Forward: read back all the rows so far, in order.
    HDF5DataUnderTest<double> back(HDF5DataParam(dir / "list", 2 * (t + 1)));
    std::vector<int> expected(2 * (t + 1));
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int>(i);
    EXPECT_EQ(back.Next(), expected) << "after batch " << t;
  }
  // Batches must keep their shapes.
  Blob<float> wider(std::vector<int>{2, 3});
  ExpectQuietError([&] { layer.Forward({&wider, &label}, {}); }, {"layer 'out' (HDF5Output)", "'data'", "2 3"});
  Blob<float> short_label(std::vector<int>{1});
  ExpectQuietError([&] { layer.Reshape({&data, &short_label}, {}); }, {"same number of rows"});
  ExpectQuietError([&] { HDF5OutputLayer<float>(HDF5OutputParam(dir / "no/such/dir.h5")).SetUp(bottom, {}); },
                   {"cannot create", dir / "no/such/dir.h5"});
  ExpectQuietError([&] { HDF5OutputLayer<float>(HDF5OutputParam("")).SetUp(bottom, {}); }, {"file_name"});
}

TEST(HDF5Layers, RunInsideANet) {
  TwoFiles files;
  const std::string out = files.dir / "out.h5";
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' "
      "  hdf5_data_param { source: '" + files.list() + "' batch_size: 4 } } "
      "layer { name: 'scale' type: 'Power' bottom: 'data' top: 'scaled' power_param { scale: 2 } } "
      "layer { name: 'out' type: 'HDF5Output' bottom: 'scaled' bottom: 'label' "
      "  hdf5_output_param { file_name: '" + out + "' } }",
      &param);
  Net<float> net(param);
  EXPECT_TRUE(net.layer_by_name("h5")->IsBatchSource());
  EXPECT_EQ(net.batch_size(), 4);
  net.Forward();
  const auto& label = *net.blob_by_name("label");
  ASSERT_EQ(net.blob_by_name("data")->shape(), (std::vector<int>{4, 2}));
  EXPECT_EQ(label.cpu_data()[3], 3);
  EXPECT_EQ(net.blob_by_name("data")->cpu_data()[7], 3.5f);
  net.Forward();
  EXPECT_EQ(label.cpu_data()[0], 4);
  EXPECT_EQ(label.cpu_data()[3], 0);  // wrapped

  // What the net wrote: the doubled data and the labels of both batches.
  const hid_t file = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<double> scaled(16), labels(8);
  const hid_t d = H5Dopen2(file, "data", H5P_DEFAULT), l = H5Dopen2(file, "label", H5P_DEFAULT);
  ASSERT_GE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, scaled.data()), 0);
  ASSERT_GE(H5Dread(l, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()), 0);
  H5Dclose(d);
  H5Dclose(l);
  H5Fclose(file);
  EXPECT_EQ(labels, (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 0}));
  EXPECT_EQ(scaled[0], 0);
  EXPECT_EQ(scaled[9], 2 * 4.5);  // row 4's second value, doubled
}

}  // namespace
}  // namespace strata
