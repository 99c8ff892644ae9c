// Snapshot files that check themselves (util/snapshot_files.hpp, docs/reliability.md): both of Caffe's formats
// round-trip and keep Caffe's layout, a changed byte is refused naming the file, Caffe's files without a checksum
// load, a solverstate resumes only the caffemodel written with it, and one run at a time holds a prefix.
#include <gtest/gtest.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"
#include "strata/util/snapshot_files.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::ReadAll;
using testing_data::TempDir;
using testing_data::WriteFile;

// Layers with parameters of distinct values (the first value of layer l, blob b is 1000 l + 100 b), one named as
// GoogLeNet names its layers.
NetParameter Weights(float scale = 1) {
  NetParameter w;
  w.set_name("w");
  const std::vector<std::pair<std::string, std::vector<int>>> layers = {
      {"conv1", {4, 1, 3, 3}}, {"inception_3a/1x1", {3, 4}}, {"relu", {}}, {"fc", {2, 3}}};
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerParameter* layer = w.add_layer();
    layer->set_name(layers[l].first);
    layer->set_type("X");
    if (layers[l].second.empty()) continue;
    for (int b = 0; b < 2; ++b) {
      BlobProto* blob = layer->add_blobs();
      int count = 1;
      const std::vector<int> shape = b == 0 ? layers[l].second : std::vector<int>{layers[l].second[0]};
      for (int d : shape) {
        blob->mutable_shape()->add_dim(d);
        count *= d;
      }
      for (int i = 0; i < count; ++i) blob->add_data(scale * (1000.f * l + 100.f * b + 0.25f * i));
    }
  }
  return w;
}

// The blobs of `w`, layer by layer, as (name, values).
std::vector<std::pair<std::string, std::vector<float>>> Values(const NetParameter& w) {
  std::vector<std::pair<std::string, std::vector<float>>> v;
  for (const LayerParameter& layer : w.layer()) {
    for (const BlobProto& b : layer.blobs()) v.emplace_back(layer.name(), std::vector<float>(b.data().begin(), b.data().end()));
  }
  std::sort(v.begin(), v.end());
  return v;
}

void FlipByteAt(const std::string& file, size_t at) {
  std::string bytes = ReadAll(file);
  ASSERT_LT(at, bytes.size());
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  WriteFile(file, bytes);
}

// Where the float `value` is stored in `file` (its first occurrence).
size_t OffsetOfFloat(const std::string& file, float value) {
  const std::string bytes = ReadAll(file);
  const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
  EXPECT_NE(at, std::string::npos) << value << " not in " << file;
  return at;
}

const SolverParameter::SnapshotFormat kFormats[] = {SolverParameter::BINARYPROTO, SolverParameter::HDF5};
const char* Name(SolverParameter::SnapshotFormat f) { return f == SolverParameter::HDF5 ? "HDF5" : "BINARYPROTO"; }

TEST(SnapshotFiles, CaffemodelsRoundTripInBothFormats) {
  TempDir dir;
  for (const auto format : kFormats) {
    SCOPED_TRACE(Name(format));
    const std::string file = dir / ("w" + CaffemodelExtension(format));
    NetParameter w = Weights();
    const uint32_t crc = WriteCaffemodel(&w, 7, file, format);
    NetParameter back;
    const SnapshotFileInfo info = ReadCaffemodel(file, &back);
    EXPECT_TRUE(info.has_checksum);
    EXPECT_EQ(info.checksum, crc);
    EXPECT_EQ(info.iter, 7);
    EXPECT_EQ(Values(back), Values(Weights()));
    EXPECT_FALSE(FileExists(file + ".tmp." + std::to_string(getpid())));
    // The same weights are the same bytes (no timestamps): a resumed run's snapshot compares with cmp.
    sleep(1);
    NetParameter again = Weights();
    WriteCaffemodel(&again, 7, dir / ("again" + CaffemodelExtension(format)), format);
    EXPECT_EQ(ReadAll(file), ReadAll(dir / ("again" + CaffemodelExtension(format))));
  }
  EXPECT_EQ(CaffemodelExtension(SolverParameter::HDF5), ".caffemodel.h5");
  EXPECT_EQ(SolverstateExtension(SolverParameter::HDF5), ".solverstate.h5");
}

// The binary caffemodel is one NetParameter to any protobuf reader: Caffe's schema, which lacks Strata's fields,
// parses it whole, the checksum an unknown field.
TEST(SnapshotFiles, BinaryCaffemodelParsesWithCaffesSchema) {
  TempDir dir;
  NetParameter w = Weights();
  WriteCaffemodel(&w, 3, dir / "w.caffemodel", SolverParameter::BINARYPROTO);
  google::protobuf::FileDescriptorProto file;
  NetParameter::descriptor()->file()->CopyTo(&file);
  for (auto& message : *file.mutable_message_type()) {
    if (message.name() != "NetParameter") continue;
    auto* fields = message.mutable_field();
    for (int i = fields->size() - 1; i >= 0; --i) {
      if (fields->Get(i).number() >= 1000) fields->DeleteSubrange(i, 1);
    }
  }
  google::protobuf::DescriptorPool pool;
  const google::protobuf::FileDescriptor* caffe = pool.BuildFile(file);
  ASSERT_NE(caffe, nullptr);
  google::protobuf::DynamicMessageFactory factory(&pool);
  const google::protobuf::Descriptor* type = caffe->FindMessageTypeByName("NetParameter");
  std::unique_ptr<google::protobuf::Message> net(factory.GetPrototype(type)->New());
  ASSERT_TRUE(net->ParseFromString(ReadAll(dir / "w.caffemodel")));
  EXPECT_EQ(net->GetReflection()->FieldSize(*net, type->FindFieldByName("layer")), 4);
  EXPECT_EQ(net->GetReflection()->GetUnknownFields(*net).field_count(), 2);  // snapshot_iter, checksum
  // And Strata's schema reads the file as one message too, the checksum its last field.
  NetParameter plain;
  ASSERT_TRUE(plain.ParseFromString(ReadAll(dir / "w.caffemodel")));
  EXPECT_EQ(plain.snapshot_iter(), 3);
  EXPECT_EQ(plain.checksum().substr(0, 8), "strataCK");
}

// Caffe's files (no checksum) load unchecked, as before.
TEST(SnapshotFiles, FilesWithoutAChecksumLoad) {
  TempDir dir;
  WriteProtoToBinaryFile(Weights(), dir / "caffe.caffemodel");
  NetParameter back;
  SnapshotFileInfo info = ReadCaffemodel(dir / "caffe.caffemodel", &back);
  EXPECT_FALSE(info.has_checksum);
  EXPECT_EQ(info.iter, -1);
  EXPECT_EQ(Values(back), Values(Weights()));
  // Caffe's HDF5 caffemodel: /data/LAYER/I, nothing else.
  {
    const hid_t file = H5Fcreate((dir / "caffe.caffemodel.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t data = H5Gcreate2(file, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t fc = H5Gcreate2(data, "fc", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const float v[6] = {1, 2, 3, 4, 5, 6};
    const hsize_t dims[2] = {2, 3};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t ds = H5Dcreate2(fc, "0", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
    H5Sclose(space);
    H5Gclose(fc);
    H5Gclose(data);
    H5Fclose(file);
  }
  info = ReadCaffemodel(dir / "caffe.caffemodel.h5", &back);
  EXPECT_FALSE(info.has_checksum);
  ASSERT_EQ(back.layer_size(), 1);
  EXPECT_EQ(back.layer(0).name(), "fc");
  ASSERT_EQ(back.layer(0).blobs_size(), 1);
  EXPECT_EQ(back.layer(0).blobs(0).shape().dim_size(), 2);
  EXPECT_EQ(back.layer(0).blobs(0).data(5), 6.f);
}

// Strata's HDF5 caffemodel has Caffe's layout: /data/LAYER/I with the blob's shape (a '/' in a layer's name makes
// a group, as HDF5 paths do).
TEST(SnapshotFiles, Hdf5CaffemodelHasCaffesLayout) {
  TempDir dir;
  NetParameter w = Weights();
  WriteCaffemodel(&w, 1, dir / "w.caffemodel.h5", SolverParameter::HDF5);
  const hid_t file = H5Fopen((dir / "w.caffemodel.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const char* path : {"/data/conv1/0", "/data/conv1/1", "/data/inception_3a/1x1/0", "/data/fc/1"}) {
    const hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    EXPECT_GE(ds, 0) << path;
    if (ds >= 0) H5Dclose(ds);
  }
  const hid_t ds = H5Dopen2(file, "/data/conv1/0", H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  hsize_t dims[4] = {};
  EXPECT_EQ(H5Sget_simple_extent_dims(space, dims, nullptr), 4);
  EXPECT_EQ(dims[0], 4u);
  EXPECT_EQ(dims[3], 3u);
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(file);
}

// One changed byte in any snapshot file is refused with one message naming the file.
TEST(SnapshotFiles, ChangedBytesAreRefused) {
  TempDir dir;
  for (const auto format : kFormats) {
    SCOPED_TRACE(Name(format));
    const std::string model = dir / ("m" + CaffemodelExtension(format));
    NetParameter w = Weights();
    WriteCaffemodel(&w, 1, model, format);
    const std::string good = ReadAll(model);
    // In a weight (fc's blob 0, value 3000.5): the checksum sees it.
    FlipByteAt(model, OffsetOfFloat(model, 3000.5f) + 1);
    NetParameter back;
    ExpectErrorContaining([&] { ReadCaffemodel(model, &back); }, {model, "is corrupt", "checksum"});
    // In a binary caffemodel every byte counts: a change anywhere is refused (the checksum, its field's form, or
    // the parse). HDF5 keeps padding and free space that no reader looks at, and its own metadata checks.
    for (size_t at = 0; format == SolverParameter::BINARYPROTO && at < good.size(); ++at) {
      std::string bad = good;
      bad[at] = static_cast<char>(bad[at] ^ 0x10);
      WriteFile(model, bad);
      try {
        ReadCaffemodel(model, &back);
        ADD_FAILURE() << "a change at byte " << at << " of " << good.size() << " was not refused";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(model), std::string::npos) << e.what();
      }
    }

    SolverState state;
    state.set_iter(5);
    state.set_current_step(2);
    state.add_data_position(12345);
    BlobProto* h = state.add_history();
    h->mutable_shape()->add_dim(3);
    for (float v : {7.5f, 8.5f, 9.5f}) h->add_data(v);
    RecordCaffemodel(model, 0x1234, 5, dir / "s", &state);
    const std::string file = dir / ("s" + SolverstateExtension(format));
    WriteSolverState(&state, file, format);
    SolverState read;
    ReadSolverState(file, &read);
    EXPECT_EQ(read.iter(), 5);
    EXPECT_EQ(read.current_step(), 2);
    EXPECT_EQ(read.data_position(0), 12345u);
    EXPECT_EQ(read.learned_net_checksum(), 0x1234u);
    ASSERT_EQ(read.history_size(), 1);
    EXPECT_EQ(read.history(0).data(2), 9.5f);
    FlipByteAt(file, OffsetOfFloat(file, 8.5f));
    ExpectErrorContaining([&] { ReadSolverState(file, &read); }, {file, "is corrupt", "checksum"});
  }
}

// A solverstate loads the caffemodel beside it that was written with it, and refuses any other.
TEST(SnapshotFiles, SolverstateResumesOnlyItsOwnCaffemodel) {
  TempDir dir;
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  for (const auto format : kFormats) {
    SCOPED_TRACE(Name(format));
    const std::string model = dir / ("a/run_iter_5" + CaffemodelExtension(format));
    const std::string state_file = dir / ("a/run_iter_5" + SolverstateExtension(format));
    NetParameter w = Weights();
    SolverState state;
    RecordCaffemodel(model, WriteCaffemodel(&w, 5, model, format), 5, state_file, &state);
    EXPECT_EQ(state.learned_net_name(), "run_iter_5" + CaffemodelExtension(format));
    NetParameter back;
    EXPECT_EQ(ReadPairedCaffemodel(state, state_file, &back), model);
    EXPECT_EQ(Values(back), Values(Weights()));

    // A copied pair loads its own caffemodel, whatever has become of the one its learned_net names.
    const std::string copy = dir / ("b/run_iter_5" + SolverstateExtension(format));
    std::filesystem::copy_file(model, dir / ("b/run_iter_5" + CaffemodelExtension(format)),
                               std::filesystem::copy_options::overwrite_existing);
    NetParameter other = Weights(2);
    WriteCaffemodel(&other, 5, model, format);  // a rerun's caffemodel where the pair was written
    EXPECT_EQ(ReadPairedCaffemodel(state, copy, &back), dir / ("b/run_iter_5" + CaffemodelExtension(format)));
    EXPECT_EQ(Values(back), Values(Weights()));

    // The rerun's caffemodel beside the first run's solverstate (a rerun killed between its two files).
    ExpectErrorContaining([&] { ReadPairedCaffemodel(state, state_file, &back); },
                          {state_file, model, "are not a pair", "iteration 5"});
    // Another iteration's caffemodel, or one without a checksum, renamed into place.
    WriteCaffemodel(&w, 6, model, format);
    ExpectErrorContaining([&] { ReadPairedCaffemodel(state, state_file, &back); }, {"are not a pair", "iteration 6"});
    if (format == SolverParameter::BINARYPROTO) {
      WriteProtoToBinaryFile(Weights(), model);
      ExpectErrorContaining([&] { ReadPairedCaffemodel(state, state_file, &back); },
                            {"are not a pair", "without a checksum"});
    }
    std::filesystem::remove(model);
    ExpectErrorContaining([&] { ReadPairedCaffemodel(state, state_file, &back); }, {state_file, "there is no", model});
  }
  // An older solverstate (learned_net only, a path relative to where it was written): the file beside it loads,
  // with a warning.
  NetParameter w = Weights();
  WriteCaffemodel(&w, 5, dir / "b/old_iter_5.caffemodel", SolverParameter::BINARYPROTO);
  SolverState old;
  old.set_learned_net("elsewhere/old_iter_5.caffemodel");
  NetParameter back;
  EXPECT_EQ(ReadPairedCaffemodel(old, dir / "b/old_iter_5.solverstate", &back), dir / "b/old_iter_5.caffemodel");
  EXPECT_EQ(Values(back), Values(Weights()));
  EXPECT_EQ(ReadPairedCaffemodel(SolverState(), dir / "b/x.solverstate", &back), "");
}

// The same through the solver: a copied pair resumes the weights written with it.
TEST(SnapshotFiles, CopiedPairResumesItsOwnWeights) {
  TempDir dir;
  const char* net = R"(name: "pair"
layer { name: "in" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }
                           data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "z"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "l" })";
  auto make = [&](const std::string& prefix, int seed) {
    SolverParameter p;
    ReadProtoFromTextString(net, p.mutable_net_param());
    p.set_base_lr(0.1f);
    p.set_max_iter(2);
    p.set_random_seed(seed);
    p.set_snapshot_prefix(prefix);
    return SolverRegistry<float>::Create(p);
  };
  auto first = make(dir / "run", 1);
  first->Solve();  // run_iter_2.*
  const std::vector<float> written(first->net()->learnable_params()[0]->cpu_data(),
                                   first->net()->learnable_params()[0]->cpu_data() + 6);
  std::filesystem::create_directories(dir / "backup");
  for (const char* f : {"run_iter_2.caffemodel", "run_iter_2.solverstate"}) {
    std::filesystem::copy_file(dir / f, dir / (std::string("backup/") + f));
  }
  auto rerun = make(dir / "run", 2);  // another run overwrites the caffemodel the solverstate names
  rerun->Solve();
  auto resumed = make(dir / "resumed", 3);
  resumed->Restore(dir / "backup/run_iter_2.solverstate");
  const float* w = resumed->net()->learnable_params()[0]->cpu_data();
  EXPECT_EQ(std::vector<float>(w, w + 6), written);
}

// A prefix in use by a live process is refused, naming it; its temporaries stay, those of ended processes go.
TEST(SnapshotFiles, OneRunPerPrefix) {
  TempDir dir;
  const std::string prefix = dir / "run";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    try {
      ClaimSnapshotPrefix(prefix);
    } catch (...) {
      _exit(1);
    }
    const ssize_t ignored = write(ready[1], "x", 1);
    (void)ignored;
    pause();
    _exit(0);
  }
  ASSERT_GT(holder, 0);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  ExpectErrorContaining([&] { ClaimSnapshotPrefix(prefix); },
                        {"snapshot_prefix '" + prefix + "' is in use by another run",
                         std::string("host ") + host + ", pid " + std::to_string(holder), prefix + ".lock"});
  // On a free prefix, a temporary file of a live process (the holder) stays, that of an ended one goes.
  const std::string other = dir / "other";
  const std::string live_tmp = other + "_iter_100.caffemodel.tmp." + std::to_string(holder);
  const std::string stale_tmp = other + "_iter_100.solverstate.tmp." + std::to_string(gone);
  WriteFile(live_tmp, "being written");
  WriteFile(stale_tmp, "half a snapshot");
  EXPECT_NO_THROW(ClaimSnapshotPrefix(other));
  EXPECT_TRUE(FileExists(live_tmp));
  EXPECT_FALSE(FileExists(stale_tmp));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_NO_THROW(ClaimSnapshotPrefix(prefix));  // its holder gone, the lock is free
  EXPECT_NO_THROW(ClaimSnapshotPrefix(prefix));  // and this process may claim it again
  EXPECT_NE(ReadAll(prefix + ".lock").find("pid " + std::to_string(getpid())), std::string::npos);
  EXPECT_NO_THROW(ClaimSnapshotPrefix(other));
  EXPECT_FALSE(FileExists(live_tmp));  // its process gone now
}

// A layer too large for one protobuf message is refused before training, pointing to HDF5.
TEST(SnapshotFiles, BinaryprotoRefusesALayerOver2GiB) {
  const std::vector<std::pair<std::string, uint64_t>> sizes = {{"small", 1000}, {"huge", 3ull << 30}};
  ExpectErrorContaining([&] { RequireSnapshotFits(sizes, SolverParameter::BINARYPROTO); },
                        {"layer 'huge'", "at most 2 GiB per layer", "snapshot_format: HDF5"});
  EXPECT_NO_THROW(RequireSnapshotFits(sizes, SolverParameter::HDF5));
  EXPECT_NO_THROW(RequireSnapshotFits({{"small", 1000}}, SolverParameter::BINARYPROTO));
}

}  // namespace
}  // namespace strata
