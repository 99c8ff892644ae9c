#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "data_test_util.hpp"
#include "strata/layers/data_layer.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ExpectErrorContaining;
using testing_data::IndexDatums;
using testing_data::Key;
using testing_data::MakeDatum;
using testing_data::TempDir;
using testing_data::WriteDatumDb;

LayerParameter DataParam(const std::string& source, int batch, Phase phase = TRAIN) {
  LayerParameter p;
  p.set_name("data");
  p.set_type("Data");
  p.set_phase(phase);
  p.add_top("data");
  p.add_top("label");
  p.mutable_data_param()->set_source(source);
  p.mutable_data_param()->set_batch_size(batch);
  p.mutable_data_param()->set_backend(DataParameter::LMDB);
  return p;
}


// A layer set up with its two tops, seeded so that runs repeat.
struct DataUnderTest {
  explicit DataUnderTest(const LayerParameter& p, uint64_t seed = 1, int rank = 0, int count = 1)
      : layer(new DataLayer<double>(p)) {
    layer->set_data_shard({rank, count});
    Strata::set_random_seed(seed);
    layer->SetUp({}, tops());
  }
  std::vector<Blob<double>*> tops() { return {&data, &label}; }
  // One Forward; returns the data values followed by the labels.
  std::vector<double> Next() {
    layer->Forward({}, tops());
    std::vector<double> v(data.cpu_data(), data.cpu_data() + data.count());
    v.insert(v.end(), label.cpu_data(), label.cpu_data() + label.count());
    return v;
  }
  Blob<double> data, label;
  std::unique_ptr<DataLayer<double>> layer;
};

TEST(DataLayer, BatchesFollowTheRecordsAndWrapAround) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(7));
  LayerParameter p = DataParam(dir / "db", 3);
  p.mutable_data_param()->set_prefetch(2);
  DataUnderTest d(p);
  EXPECT_EQ(d.data.shape(), (std::vector<int>{3, 1, 2, 2}));
  EXPECT_EQ(d.label.shape(), (std::vector<int>{3}));
  EXPECT_EQ(d.layer->position(), 0u);
  const int expected[4][3] = {{0, 1, 2}, {3, 4, 5}, {6, 0, 1}, {2, 3, 4}};
  for (int t = 0; t < 4; ++t) {
    d.layer->Forward({}, d.tops());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(d.label.cpu_data()[i], expected[t][i]) << "batch " << t << " item " << i;
      for (int k = 0; k < 4; ++k) EXPECT_EQ(d.data.cpu_data()[4 * i + k], expected[t][i]);
    }
    EXPECT_EQ(d.layer->position(), 3u * (t + 1));
  }
}

TEST(DataLayer, DataOnlyTopAndFloatDeprecatedScale) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(4));
  LayerParameter p = DataParam(dir / "db", 2);
  p.clear_top();
  p.add_top("data");
  p.mutable_data_param()->set_scale(0.5f);  // Caffe's old place for transform_param.scale
  DataLayer<float> layer(p);
  Blob<float> data;
  layer.SetUp({}, {&data});
  layer.Forward({}, {&data});
  layer.Forward({}, {&data});
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 1, 2, 2}));
  EXPECT_FLOAT_EQ(data.cpu_data()[0], 1.0f);  // record 2 * 0.5
  EXPECT_FLOAT_EQ(data.cpu_data()[4], 1.5f);  // record 3 * 0.5
}

// A database whose records differ in every pixel, so crops and mirrors show.
std::vector<Datum> PatternDatums(int n) {
  std::vector<Datum> v;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(2 * 4 * 4);
    for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(i * 32 + k);
    v.push_back(MakeDatum(2, 4, 4, px, i));
  }
  return v;
}

TEST(DataLayer, ShardsConcatenateToTheSingleRankBatch) {
  TempDir dir;
  WriteDatumDb(dir / "db", PatternDatums(7));
  const int b = 2;
  for (int n_ranks : {2, 3}) {
    LayerParameter single_p = DataParam(dir / "db", n_ranks * b);
    auto* tp = single_p.mutable_transform_param();
    tp->set_crop_size(3);
    tp->set_mirror(true);
    tp->set_scale(0.25f);
    single_p.mutable_data_param()->set_rand_skip(5);
    DataUnderTest single(single_p, 42);
    std::vector<std::unique_ptr<DataUnderTest>> ranks;
    LayerParameter rank_p = single_p;
    rank_p.mutable_data_param()->set_batch_size(b);
    for (int r = 0; r < n_ranks; ++r) ranks.emplace_back(new DataUnderTest(rank_p, 42, r, n_ranks));
    EXPECT_EQ(ranks[1]->layer->data_shard().index, 1);
    EXPECT_EQ(ranks[1]->layer->data_shard().count, n_ranks);
    const int item = 2 * 3 * 3;
    for (int t = 0; t < 8; ++t) {  // several passes over 7 records
      const std::vector<double> whole = single.Next();
      std::vector<double> data, labels;
      for (auto& r : ranks) {
        const std::vector<double> part = r->Next();
        data.insert(data.end(), part.begin(), part.begin() + b * item);
        labels.insert(labels.end(), part.begin() + b * item, part.end());
        EXPECT_EQ(r->layer->position(), single.layer->position());
      }
      data.insert(data.end(), labels.begin(), labels.end());
      ASSERT_EQ(data, whole) << n_ranks << " ranks, iteration " << t;
    }
  }
}

// The shard is the Net's, handed to its data layers: two nets given shards 0 and 1 of 2 read alternate batches
// of the records, and no process-wide setting is read or changed on the way.
TEST(DataLayer, NetsGivenTwoShardsReadDisjointInterleavedBatches) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(12));
  NetParameter param;
  *param.add_layer() = DataParam(dir / "db", 2);
  param.mutable_state()->set_phase(TRAIN);
  Net<float> first(param, {0, 2}), second(param, {1, 2});
  EXPECT_EQ(first.layers()[0]->data_shard().index, 0);
  EXPECT_EQ(second.layers()[0]->data_shard().index, 1);
  EXPECT_EQ(second.layers()[0]->data_shard().count, 2);
  std::vector<int> read0, read1;
  for (int t = 0; t < 3; ++t) {
    for (auto [net, read] : {std::make_pair(&first, &read0), std::make_pair(&second, &read1)}) {
      net->Forward();
      const Blob<float>& label = *net->blob_by_name("label");
      for (int i = 0; i < label.count(); ++i) read->push_back(static_cast<int>(label.cpu_data()[i]));
    }
  }
  EXPECT_EQ(read0, (std::vector<int>{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(read1, (std::vector<int>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(Strata::solver_rank(), 0);
  EXPECT_EQ(Strata::solver_count(), 1);
}

TEST(DataLayer, SetPositionResumesExactly) {
  TempDir dir;
  WriteDatumDb(dir / "db", PatternDatums(5));
  LayerParameter p = DataParam(dir / "db", 3);
  p.mutable_transform_param()->set_crop_size(2);
  p.mutable_transform_param()->set_mirror(true);
  DataUnderTest a(p, 9);
  std::vector<std::vector<double>> run;
  std::vector<uint64_t> positions;
  for (int t = 0; t < 8; ++t) {
    run.push_back(a.Next());
    positions.push_back(a.layer->position());
  }
  // A fresh layer (as after a restart) told where the stream stood after iteration 3.
  DataUnderTest b(p, 9);
  b.layer->set_position(positions[2]);
  for (int t = 3; t < 8; ++t) EXPECT_EQ(b.Next(), run[t]) << "iteration " << t;
  EXPECT_EQ(b.layer->position(), positions[7]);
  // Going back on the same layer, with batches already prefetched past it.
  a.layer->set_position(positions[0]);
  EXPECT_EQ(a.layer->position(), positions[0]);
  for (int t = 1; t < 4; ++t) EXPECT_EQ(a.Next(), run[t]);
}

TEST(DataLayer, RandSkipStartsWithinRange) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(10));
  LayerParameter p = DataParam(dir / "db", 1);
  p.mutable_data_param()->set_rand_skip(6);
  std::set<uint64_t> starts;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    DataUnderTest d(p, seed);
    const uint64_t start = d.layer->position();
    EXPECT_LT(start, 6u);
    d.Next();
    EXPECT_EQ(d.label.cpu_data()[0], static_cast<double>(start));
    starts.insert(start);
  }
  EXPECT_GT(starts.size(), 1u);
}

TEST(DataLayer, TestPhaseIsDeterministicCentreCrop) {
  TempDir dir;
  WriteDatumDb(dir / "db", PatternDatums(3));
  LayerParameter p = DataParam(dir / "db", 1, TEST);
  p.mutable_transform_param()->set_crop_size(2);
  p.mutable_transform_param()->set_mirror(true);
  DataUnderTest a(p, 1), b(p, 2);
  const std::vector<double> first = a.Next();
  EXPECT_EQ(first, b.Next());
  // Record 0 channel 0 holds 0..15 in a 4x4 grid; the centre 2x2 is 5, 6, 9, 10; channel 1 adds 16.
  EXPECT_EQ(first, (std::vector<double>{5, 6, 9, 10, 21, 22, 25, 26, 0}));
}

// The same records in a LevelDB give the LMDB's batches, named as LEVELDB or found by the source's files, on one
// rank and on two (two readers of one LevelDB at once: each opens its own view of it).
TEST(DataLayer, LevelDbGivesTheLmdbBatches) {
  TempDir dir;
  WriteDatumDb(dir / "lmdb", PatternDatums(7));
  WriteDatumDb(dir / "leveldb", PatternDatums(7), RecordBackend::kLevelDb);
  for (int count : {1, 2}) {
    for (int rank = 0; rank < count; ++rank) {
      LayerParameter named = DataParam(dir / "leveldb", 3);
      named.mutable_data_param()->set_backend(DataParameter::LEVELDB);
      LayerParameter found = DataParam(dir / "leveldb", 3);
      found.mutable_data_param()->clear_backend();
      DataUnderTest lmdb(DataParam(dir / "lmdb", 3), 1, rank, count), a(named, 1, rank, count),
          b(found, 1, rank, count);
      EXPECT_EQ(a.layer->num_records(), 7u);
      for (int t = 0; t < 4; ++t) {
        const std::vector<double> want = lmdb.Next();
        EXPECT_EQ(a.Next(), want) << "rank " << rank << " of " << count << ", batch " << t;
        EXPECT_EQ(b.Next(), want) << "rank " << rank << " of " << count << ", batch " << t;
      }
    }
  }
}

TEST(DataLayer, BadParametersAreErrors) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(3));
  Blob<float> data, label;
  auto setup = [&](const LayerParameter& p) {
    DataLayer<float> layer(p);
    layer.SetUp({}, {&data, &label});
  };
  ExpectErrorContaining([&] { setup(DataParam(dir / "db", 0)); }, {"batch_size", "positive"});
  LayerParameter leveldb = DataParam(dir / "db", 2);
  leveldb.mutable_data_param()->set_backend(DataParameter::LEVELDB);
  ExpectErrorContaining([&] { setup(leveldb); }, {dir / "db", "is not a LevelDB"});
  ExpectErrorContaining([&] { setup(DataParam(dir / "missing", 2)); }, {dir / "missing"});
  LayerParameter unnamed = DataParam(dir / "missing", 2);
  unnamed.mutable_data_param()->clear_backend();
  ExpectErrorContaining([&] { setup(unnamed); }, {dir / "missing", "an LMDB or a LevelDB", "No such file"});
  ExpectErrorContaining([&] { setup(DataParam("", 2)); }, {"source"});
  LayerParameter prefetch = DataParam(dir / "db", 2);
  prefetch.mutable_data_param()->set_prefetch(0);
  ExpectErrorContaining([&] { setup(prefetch); }, {"prefetch"});
  LayerParameter bad_mean = DataParam(dir / "db", 2);
  bad_mean.mutable_transform_param()->add_mean_value(1);
  bad_mean.mutable_transform_param()->add_mean_value(2);
  ExpectErrorContaining([&] { setup(bad_mean); }, {"mean_value", dir / "db", Key(0)});

  // Through a Net the message also names the layer.
  NetParameter net;
  *net.add_layer() = DataParam(dir / "db", 0);
  ExpectErrorContaining([&] { Net<float> n(net); }, {"layer 'data' (Data)", "batch_size"});
}

TEST(DataLayer, BadRecordsSurfaceFromForward) {
  TempDir dir;
  // Records 0-2 are fine, 3 is not a Datum, 4 has too few bytes, 5 has another shape.
  {
    LmdbWriter w(dir / "db");
    for (int i = 0; i < 3; ++i) w.Put(Key(i), testing_data::IndexDatum(i).SerializeAsString());
    w.Put(Key(3), std::string("\xff\xff\xff\xff", 4));
    w.Put(Key(4), MakeDatum(1, 2, 2, {1, 2, 3}, 0).SerializeAsString());
    w.Put(Key(5), MakeDatum(1, 3, 3, std::vector<uint8_t>(9, 1), 0).SerializeAsString());
    w.Close();
  }
  LayerParameter p = DataParam(dir / "db", 2);
  DataUnderTest d(p);
  d.Next();  // records 0, 1
  for (int again = 0; again < 2; ++again) {
    ExpectErrorContaining([&] { d.Next(); },
                          {"layer 'data' (Data)", dir / "db", "key '00000003'", "record 3", "not a Datum"});
  }
  d.layer->set_position(4);
  ExpectErrorContaining([&] { d.Next(); }, {"key '00000004'", "3 bytes"});
  d.layer->set_position(5);
  ExpectErrorContaining([&] { d.Next(); }, {"key '00000005'", "1 x 3 x 3", "1 x 2 x 2"});
  d.layer->set_position(0);
  EXPECT_EQ(d.Next().back(), 1.0);  // label of record 1: the layer works again
}

// Destroyed while its thread prefetches or waits on a full queue, the layer stops within a bound (a stop that
// waited forever fails here instead of hanging the suite), and the batches it gave before are the right ones.
TEST(DataLayer, StopsCleanlyWhateverTheThreadIsDoing) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(50));
  LayerParameter p = DataParam(dir / "db", 4);
  for (int i = 0; i < 10; ++i) {
    auto d = std::make_unique<DataUnderTest>(p);
    for (int t = 0; t < i % 3; ++t) {
      const std::vector<double> batch = d->Next();  // 4 x 4 pixels, then 4 labels: record k is k everywhere
      for (int k = 0; k < 4; ++k) EXPECT_EQ(batch[16 + k], 4 * t + k) << "layer " << i << ", batch " << t;
    }
    auto stopped = std::make_shared<std::promise<void>>();
    std::future<void> done = stopped->get_future();
    std::thread stopper([layer = std::move(d), stopped]() mutable {
      layer.reset();
      stopped->set_value();
    });
    if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      stopper.detach();  // leaks the layer: the test has failed and must not hang
      FAIL() << "layer " << i << " did not stop within 30 s of being destroyed";
    }
    stopper.join();
  }
}

TEST(DataLayer, RunsInsideANet) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(6));
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'mnist' type: 'Data' top: 'data' top: 'label' "
      "  data_param { source: '" + dir / "db" + "' batch_size: 4 backend: LMDB } "
      "  transform_param { scale: 2 } }",
      &param);
  Net<float> net(param);
  net.Forward();
  const auto& label = *net.blob_by_name("label");
  const auto& data = *net.blob_by_name("data");
  ASSERT_EQ(data.shape(), (std::vector<int>{4, 1, 2, 2}));
  EXPECT_EQ(label.cpu_data()[3], 3);
  EXPECT_EQ(data.cpu_data()[12], 6);  // record 3 * scale 2
  net.Forward();
  EXPECT_EQ(label.cpu_data()[0], 4);
  EXPECT_EQ(label.cpu_data()[2], 0);  // wrapped
}

// A Data layer brings the net's batch, though the caller fills none of its tops.
TEST(DataLayer, IsTheNetsBatchSource) {
  TempDir dir;
  WriteDatumDb(dir / "db", IndexDatums(6));
  NetParameter param;
  ReadProtoFromTextString(
      "layer { name: 'mnist' type: 'Data' top: 'data' top: 'label' "
      "  data_param { source: '" + dir / "db" + "' batch_size: 3 backend: LMDB } }",
      &param);
  Net<float> net(param);
  const Layer<float>& data = *net.layer_by_name("mnist");
  EXPECT_TRUE(data.IsBatchSource());
  EXPECT_FALSE(data.IsNetInput());
  EXPECT_TRUE(net.input_blobs().empty());
  EXPECT_EQ(net.batch_size(), 3);
}

}  // namespace
}  // namespace strata
