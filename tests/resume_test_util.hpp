// Exact resume, shared by the unit test (one rank, tests/test_solver.cpp) and the MPI test (N ranks,
// tests/mpi/test_data_parallel_engine.cpp): train 30 iterations straight; train 20, snapshot, and let a new
// solver restore and train to 30. The resumed run must repeat iterations 20..29 bit for bit: the same losses,
// the same final weights, the same test scores. The net reads an LMDB through a Data layer (random crop and
// mirror on or off) and has a Dropout layer and a test net, so the snapshot must carry the data positions
// (train and test), the transform seed and every rank's random engine. The convolution's 16 outputs have oneDNN keep
// its weights, their gradient and the solver's history in a blocked layout of its own (strata/memory_format.hpp): the
// snapshot must write them plain and the restored run take them back.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/solver.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace resume_test {

constexpr int kRecords = 97;  // not a multiple of any batch: the streams wrap mid-batch
constexpr int kStraight = 30, kSnapshotAt = 20;

// Record i: 1 x 8 x 8 hashed pixels, label i mod 3.
inline Datum Record(int i) {
  std::vector<uint8_t> pixels(64);
  for (int j = 0; j < 64; ++j) pixels[j] = static_cast<uint8_t>((static_cast<uint32_t>(i * 97 + j * 31 + 5) * 2654435761u) >> 24);
  return testing_data::MakeDatum(1, 8, 8, pixels, i % 3);
}

inline void WriteDb(const std::string& path) {
  std::vector<Datum> records;
  for (int i = 0; i < kRecords; ++i) records.push_back(Record(i));
  testing_data::WriteDatumDb(path, records);
}

inline SolverParameter Param(const std::string& source, bool random_transforms, int random_seed,
                             const std::string& prefix) {
  std::ostringstream net;
  net << "name: 'resume'\n"
      << "layer { name: 'data' type: 'Data' top: 'data' top: 'label'\n"
      << "        transform_param { scale: 0.00390625 "
      << (random_transforms ? "crop_size: 6 mirror: true" : "") << " }\n"
      << "        data_param { source: '" << source << "' batch_size: 5 } }\n"
      << "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'\n"
      << "        convolution_param { num_output: 16 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
      << "layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }\n"
      << "layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv' top: 'ip1'\n"
      << "        inner_product_param { num_output: 10 weight_filler { type: 'gaussian' std: 0.2 } } }\n"
      << "layer { name: 'drop' type: 'Dropout' bottom: 'ip1' top: 'ip1' dropout_param { dropout_ratio: 0.4 } }\n"
      << "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'\n"
      << "        inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.2 } } }\n"
      << "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: 'loss' }\n"
      << "layer { name: 'accuracy' type: 'Accuracy' bottom: 'ip2' bottom: 'label' top: 'accuracy'\n"
      << "        include { phase: TEST } }\n";
  SolverParameter p;
  ReadProtoFromTextString(net.str(), p.mutable_net_param());
  p.add_test_iter(2);
  p.set_test_interval(10);
  p.set_base_lr(0.05f);
  p.set_momentum(0.9f);
  p.set_weight_decay(0.001f);
  p.set_lr_policy("step");
  p.set_gamma(0.5f);
  p.set_stepsize(25);
  p.set_max_iter(kStraight);
  p.set_random_seed(random_seed);
  p.set_snapshot_prefix(prefix);
  p.set_snapshot_after_train(false);
  return p;
}

struct Run {
  std::vector<float> losses;               // of iterations kSnapshotAt .. kStraight - 1
  std::vector<std::vector<float>> weights;  // after kStraight iterations
  std::vector<float> scores;               // the test net at kStraight
};

// Steps `solver` (an engine already installed) up to iteration kStraight, recording the losses from
// kSnapshotAt on.
inline Run Finish(Solver<float>* solver) {
  Run run;
  while (solver->iter() < kStraight) {
    const int iter = solver->iter();
    solver->Step(1);
    if (iter >= kSnapshotAt) run.losses.push_back(solver->net()->blob_by_name("loss")->cpu_data()[0]);
  }
  for (const std::vector<float>& s : solver->TestAll()) run.scores.insert(run.scores.end(), s.begin(), s.end());
  for (Blob<float>* b : solver->net()->learnable_params()) run.weights.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
  return run;
}

// The straight run and the resumed one, reading the LMDB `db` (this rank's `shard` of it) and snapshotting to
// `dir`. `install` puts the engine into a new solver (nothing: the LocalEngine); `barrier` lets every rank wait
// for rank 0's snapshot.
// The resumed solver is made with another random_seed, so everything random must come from the snapshot.
inline void Compare(const std::string& db, const std::string& dir, bool random_transforms, const DataShard& shard,
                    const std::function<void(Solver<float>*)>& install, const std::function<void()>& barrier) {
  const std::string prefix = dir + (random_transforms ? "/random" : "/plain");
  EngineSetup setup;
  setup.data_shard = shard;
  auto make = [&](int seed) {
    auto s = SolverRegistry<float>::Create(Param(db, random_transforms, seed, prefix), setup);
    install(s.get());
    return s;
  };
  auto straight_solver = make(11);
  const Run straight = Finish(straight_solver.get());
  straight_solver.reset();

  auto first = make(11);
  first->Step(kSnapshotAt);
  first->Snapshot();
  first.reset();
  barrier();
  auto resumed = make(12345);
  resumed->Restore(prefix + "_iter_" + std::to_string(kSnapshotAt) + ".solverstate");
  const Run again = Finish(resumed.get());

  ASSERT_EQ(straight.losses.size(), again.losses.size());
  for (size_t i = 0; i < straight.losses.size(); ++i) {
    EXPECT_EQ(straight.losses[i], again.losses[i]) << "iteration " << kSnapshotAt + i;
  }
  EXPECT_EQ(straight.scores, again.scores);
  ASSERT_EQ(straight.weights.size(), again.weights.size());
  for (size_t i = 0; i < straight.weights.size(); ++i) EXPECT_EQ(straight.weights[i], again.weights[i]) << "param " << i;
}

}  // namespace resume_test
}  // namespace strata
