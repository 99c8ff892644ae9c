// The `strata` program itself on bad input: every case ends with exactly one "error: ..." line that says what
// is wrong and where, exit status 1, and no crash, abort or glog CHECK. Skipped when the tool was not built
// (the test target does not depend on it).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/device.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ReadAll;
using testing_data::Replace;
using testing_data::Shell;
using testing_data::TempDir;
using testing_data::WriteFile;

const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/bin/strata";

// A tiny valid net; the cases below break one thing in it at a time.
const char* kNet = R"(name: "tiny"
layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" }
)";


// The net with its input from a DummyData layer (zeros) instead of an Input layer, for `strata test`, which
// refuses a net whose Input layers nothing fills.
std::string WithDummyData(const std::string& net) {
  return Replace(Replace(net, "type: \"Input\"", "type: \"DummyData\""), "input_param", "dummy_data_param");
}

class StrataTool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kStrata)) GTEST_SKIP() << "strata not built";
  }

  // Runs `strata ARGS` and expects exit status 1 with exactly one "error:" line containing every part.
  void ExpectError(const std::string& args, const std::vector<std::string>& parts) {
    const std::string log = dir_ / "stderr";
    const int status = Shell("cd " + dir_.path() + " && " + kStrata + " " + args + " > /dev/null 2> " + log);
    const std::string err = ReadAll(log);
    EXPECT_EQ(status, 1) << args << "\n" << err;
    std::istringstream lines(err);
    std::string line, error_line;
    int errors = 0;
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("error: ", 0) == 0) {
        ++errors;
        error_line = l;
      }
      EXPECT_EQ(l.find("Check failed"), std::string::npos) << l;
      EXPECT_EQ(l.find("terminate called"), std::string::npos) << l;
    }
    EXPECT_EQ(errors, 1) << args << "\n" << err;
    for (const auto& p : parts) EXPECT_NE(error_line.find(p), std::string::npos) << "'" << p << "' not in: " << error_line;
  }

  std::string Write(const std::string& name, const std::string& text) {
    WriteFile(dir_ / name, text);
    return dir_ / name;
  }

  TempDir dir_;
};

#ifdef STRATA_USE_CUDA
// A CPU run of a GPU build never loads cuBLAS, cuDNN or NCCL (src/strata/cuda_libraries.hpp): the loader's own log
// (LD_DEBUG=libs) names every library a process opens, at start-up or later.
TEST_F(StrataTool, CpuRunOfAGpuBuildLoadsNoCudaLibraries) {
  const std::string net = Write("net.prototxt", R"(name: "conv"
layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } shape { dim: 2 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 2 kernel_size: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "z" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" top: "loss" }
)");
  const std::string log = dir_ / "log";
  ASSERT_EQ(Shell("LD_DEBUG=libs " + kStrata + " time --model=" + net + " --iterations=2 > " + log + " 2>&1"), 0)
      << ReadAll(log);
  const std::string out = ReadAll(log);
  ASSERT_NE(out.find("find library=libglog"), std::string::npos) << "no loader log: " << out;
  for (const char* library : {"libcublas", "libcusolver", "libcudnn", "libnccl"}) {
    EXPECT_EQ(out.find(std::string("library=") + library), std::string::npos) << library << " was loaded:\n" << out;
  }
}
#endif

TEST_F(StrataTool, ValidNetTimes) {
  const std::string net = Write("net.prototxt", kNet);
  EXPECT_EQ(Shell(kStrata + " time --model=" + net + " --iterations=2 > " + dir_ / "out" + " 2>&1"), 0)
      << ReadAll(dir_ / "out");
  const std::string out = ReadAll(dir_ / "out");
  EXPECT_NE(out.find("Total learnable parameters: 16"), std::string::npos) << out;
  // Then whole SGD steps of the same net, with the batch the Input layer gives.
  EXPECT_NE(out.find("Average SGD step"), std::string::npos) << out;
  EXPECT_NE(out.find("images/s (batch 2)"), std::string::npos) << out;
}

// --timeline: the timed iterations' layers as Chrome-trace spans, forward and backward of every layer.
TEST_F(StrataTool, TimeWritesATimeline) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string trace = dir_ / "trace.json";
  EXPECT_EQ(Shell(kStrata + " time --model=" + net + " --iterations=3 --step=false --timeline=" + trace + " > " +
                  dir_ / "out" + " 2>&1"),
            0)
      << ReadAll(dir_ / "out");
  const std::string json = ReadAll(trace);
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u) << json;
  for (const char* span : {"\"name\":\"ip\",\"cat\":\"forward\"", "\"name\":\"ip\",\"cat\":\"backward\"",
                                  "\"name\":\"loss\",\"cat\":\"forward\""}) {
    size_t count = 0;
    for (size_t at = json.find(span); at != std::string::npos; at = json.find(span, at + 1)) ++count;
    EXPECT_EQ(count, 3u) << span << " once per timed iteration in:\n" << json;
  }
}

TEST_F(StrataTool, UnknownLayerTypeListsKnownTypes) {
  const std::string net = Write("net.prototxt", Replace(kNet, "\"InnerProduct\"", "\"InnerProdukt\""));
  ExpectError("time --model=" + net, {"InnerProdukt", "'ip'", "InnerProduct", "Convolution"});
}

TEST_F(StrataTool, MalformedPrototxtGivesFileLineAndColumn) {
  const std::string net = Write("net.prototxt", Replace(kNet, "top: \"z\"", "top: \"z\" }"));
  ExpectError("time --model=" + net, {net, ":3:"});
}

TEST_F(StrataTool, UnknownFieldIsNamed) {
  const std::string net = Write("net.prototxt", Replace(kNet, "num_output: 4", "num_outputs: 4"));
  ExpectError("time --model=" + net, {net, "num_outputs"});
}

TEST_F(StrataTool, MissingBottomIsNamed) {
  const std::string net = Write("net.prototxt", Replace(kNet, "bottom: \"x\"", "bottom: \"w\""));
  ExpectError("time --model=" + net, {"'ip'", "'w'"});
}

TEST_F(StrataTool, ShapeMismatchNamesTheLayer) {
  // 2 scores against 3 labels.
  const std::string net = Write("net.prototxt", Replace(kNet, "shape { dim: 2 } }", "shape { dim: 3 } }"));
  ExpectError("time --model=" + net, {"'loss'"});
}

TEST_F(StrataTool, MissingModelFile) { ExpectError("time --model=" + dir_ / "nope.prototxt", {"nope.prototxt"}); }

TEST_F(StrataTool, BadCommandAndFlags) {
  ExpectError("frobnicate", {"unknown command", "frobnicate"});
  ExpectError("time", {"--model"});
  const std::string net = Write("net.prototxt", kNet);
  ExpectError("time --model=" + net + " --phase=TRAINING", {"--phase", "TRAINING"});
  ExpectError("time --model=" + net + " --gpu_channels_last=float",
              {"--gpu_channels_last", "16bit, all or none", "float"});
}

TEST_F(StrataTool, TrainWithoutNetOrData) {
  ExpectError("train --solver=" + Write("no_net.prototxt", "base_lr: 0.01\nmax_iter: 10\n"), {"net"});
  // A Data layer whose LMDB does not exist: the path is named.
  const std::string net = Write("data_net.prototxt", Replace(kNet,
      R"(layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } })",
      R"(layer { name: "d" type: "Data" top: "x" top: "y" data_param { source: "missing_lmdb" batch_size: 2 } })"));
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 10\n");
  ExpectError("train --solver=" + solver, {"missing_lmdb"});
}

// A net nested 5,000 levels deep (Reversible blocks inside Reversible blocks) overflowed protobuf's recursive text
// parser's stack; now the depth is refused with the file and place.
TEST_F(StrataTool, DeeplyNestedPrototxtIsRefused) {
  std::string text = "name: 'deep'\nlayer { ";
  const int depth = 5000;
  for (int i = 0; i < depth; ++i) text += "name: 'r' type: 'Reversible' reversible_param { f { ";
  text += "name: 'x' type: 'ReLU'";
  for (int i = 0; i < depth; ++i) text += " } }";
  text += " }\n";
  ExpectError("time --model=" + Write("deep.prototxt", text), {"deep.prototxt", "too deep"});
}

// Output paths that cannot be written fail before the first iteration, naming the setting: a snapshot_prefix or a
// --timeline under a regular file (root may write anywhere else). The solver would otherwise train for 5,000
// iterations before its first snapshot failed. A missing directory is created.
TEST_F(StrataTool, UnwritableOutputPathsFailBeforeTraining) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string file = Write("plain_file", "not a directory");
  const std::string solver = "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 100000000\nsnapshot: 5000\n";
  ExpectError("train --solver=" + Write("s1.prototxt", solver + "snapshot_prefix: \"" + file + "/snap/lenet\"\n"),
              {"snapshot_prefix", "plain_file"});
  ExpectError("train --timeline=" + file + "/trace.json --solver=" +
                  Write("s2.prototxt", solver + "snapshot_prefix: \"" + dir_ / "snap" + "\"\n"),
              {"--timeline", "plain_file"});
  ExpectError("time --model=" + net + " --timeline=" + file + "/trace.json", {"--timeline", "plain_file"});

  const std::string fresh = dir_ / "made/for/snapshots/lenet";
  const std::string ok = Write("s3.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 2\nsnapshot_prefix: \"" +
                                                  fresh + "\"\n");
  EXPECT_EQ(Shell(kStrata + " train --solver=" + ok + " > " + dir_ / "out" + " 2>&1"), 0) << ReadAll(dir_ / "out");
  EXPECT_TRUE(std::filesystem::exists(fresh + "_iter_2.caffemodel")) << ReadAll(dir_ / "out");
}

// Logs read as Caffe's do: glog's prefix without the year ("I1124 21:45:08.123456 ...", which Caffe's
// parse_log.py expects), and `strata test` prints every batch's outputs, then "Loss:" and each output's mean
// exactly once, in the net's output order.
TEST_F(StrataTool, LogsReadAsCaffesTools) {
  const std::string net = Write("net.prototxt", WithDummyData(Replace(kNet, "layer { name: \"loss\"",
      "layer { name: \"acc\" type: \"Accuracy\" bottom: \"z\" bottom: \"y\" top: \"accuracy\" }\nlayer { name: \"loss\"")));
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 4\ndisplay: 2\n"
                                   "snapshot_prefix: \"" + dir_ / "snap" + "\"\n");
  const std::string train = dir_ / "train.log", test = dir_ / "test.log";
  ASSERT_EQ(Shell(kStrata + " train --solver=" + solver + " > " + train + " 2>&1"), 0) << ReadAll(train);
  ASSERT_EQ(Shell(kStrata + " test --model=" + net + " --weights=" + dir_ / "snap_iter_4.caffemodel" +
                  " --iterations=2 > " + test + " 2>&1"), 0) << ReadAll(test);
  const std::regex prefix(R"(^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ ]+:\d+\] )");
  int glog_lines = 0;
  for (const std::string& file : {train, test}) {
    std::istringstream lines(ReadAll(file));
    for (std::string l; std::getline(lines, l);) {
      if (l.empty() || (l[0] != 'I' && l[0] != 'W')) continue;
      EXPECT_TRUE(std::regex_search(l, prefix)) << "not Caffe's log prefix: " << l;
      ++glog_lines;
    }
  }
  EXPECT_GT(glog_lines, 5);
  EXPECT_NE(ReadAll(train).find("Iteration 4, loss = "), std::string::npos) << ReadAll(train);
  // The test's lines, in order.
  std::vector<std::string> order;
  std::istringstream lines(ReadAll(test));
  for (std::string l; std::getline(lines, l);) {
    const size_t at = l.find("] ");
    if (at != std::string::npos) order.push_back(l.substr(at + 2, l.find(" = ") == std::string::npos ? std::string::npos
                                                                                                  : l.find(" = ") - at - 2));
  }
  const std::vector<std::string> want = {"Batch 0, accuracy", "Batch 0, loss", "Batch 1, accuracy", "Batch 1, loss",
                                         "Loss: ", "accuracy", "loss"};
  std::vector<std::string> got;
  for (const auto& o : order) {
    if (o.rfind("Batch", 0) == 0 || o.rfind("Loss:", 0) == 0 || o == "accuracy" || o == "loss") {
      got.push_back(o.rfind("Loss:", 0) == 0 ? "Loss: " : o);
    }
  }
  EXPECT_EQ(got, want) << ReadAll(test);
  EXPECT_NE(ReadAll(test).find("loss = "), std::string::npos);
  EXPECT_NE(ReadAll(test).find(" (* 1 = "), std::string::npos) << "the loss line shows its weight, as Caffe's";
}

// strata draw: the net as Graphviz's DOT (layers, blobs with shapes, parameters, in-place blobs as new nodes), a
// picture through dot, and from the prototxt alone when a data source is missing.
TEST_F(StrataTool, DrawsTheNet) {
  const std::string net = Write("net.prototxt", Replace(kNet, "layer { name: \"loss\"",
      "layer { name: \"relu\" type: \"ReLU\" bottom: \"z\" top: \"z\" }\nlayer { name: \"loss\""));
  const std::string dot = dir_ / "net.dot", log = dir_ / "draw.log";
  ASSERT_EQ(Shell(kStrata + " draw --model=" + net + " --out=" + dot + " > " + log + " 2>&1"), 0) << ReadAll(log);
  const std::string text = ReadAll(dot);
  for (const char* part : {"digraph \"tiny\"", "rankdir=LR", "ip\\n(InnerProduct)\\n4 out\\n16 parameters",
                           "z\\n(2, 4)", "x\\n(2, 3)", "relu\\n(ReLU)", "\"blob:z#0\" -> \"layer:2\"",
                           "\"layer:2\" -> \"blob:z#1\""}) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
  }
  if (Shell("command -v dot > /dev/null") == 0) {
    const std::string svg = dir_ / "net.svg";
    ASSERT_EQ(Shell(kStrata + " draw --rankdir=TB --model=" + net + " --out=" + svg + " > " + log + " 2>&1"), 0)
        << ReadAll(log);
    EXPECT_NE(ReadAll(svg).find("<svg"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(svg + ".dot.tmp"));
  }
  // A Data layer whose LMDB is not here: drawn all the same, without shapes, with a warning.
  const std::string data_net = Write("data_net.prototxt", Replace(kNet,
      R"(layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } })",
      R"(layer { name: "d" type: "Data" top: "x" top: "y" data_param { source: "missing_lmdb" batch_size: 2 } })"));
  ASSERT_EQ(Shell(kStrata + " draw --model=" + data_net + " --out=" + dot + " > " + log + " 2>&1"), 0) << ReadAll(log);
  EXPECT_NE(ReadAll(log).find("without blob shapes"), std::string::npos) << ReadAll(log);
  EXPECT_NE(ReadAll(dot).find("d\\n(Data)"), std::string::npos);
  ExpectError("draw --model=" + net + " --out=" + dir_ / "net.jpeg", {"--out", ".png, .svg, .pdf or .dot"});
  ExpectError("draw --model=" + net + " --out=" + dot + " --rankdir=UP", {"LR, TB, RL or BT", "UP"});
  ExpectError("draw --model=" + net, {"--out"});
}

// The allreduce flags are the tool's own (libstrata reads no flags): a bad name or a table for a forced
// algorithm is refused before MPI comes up.
TEST_F(StrataTool, AllreduceFlags) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 2\n");
  ExpectError("train --solver=" + solver + " --allreduce=quicksort", {"unknown allreduce algorithm 'quicksort'"});
  const std::string table = Write("ar.table", "* inf ring\n");
  ExpectError("train --solver=" + solver + " --allreduce=ring --allreduce_table=" + table,
              {table, "table for the hybrid", "ring"});
  ExpectError("train --solver=" + solver + " --allreduce_table=" + dir_ / "missing.table", {"missing.table"});
}

// pipeline_param (docs/pipeline.md) on one rank: the plan's errors before any iteration, one message each; a
// one-stage pipeline trains and reports its stage.
TEST_F(StrataTool, PipelineBadInputAndOneStage) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string base = "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 2\nsnapshot_after_train: false\n";
  ExpectError("train --solver=" + Write("s1.prototxt", base + "pipeline_param { stages: 2 }\n"),
              {"2 stages x 1 replicas, but the job has 1 ranks"});
  ExpectError("train --solver=" + Write("s2.prototxt", base + "pipeline_param { cut: \"ip\" }\n"),
              {"names 1 cut(s) for 1 stages"});
  ExpectError("train --solver=" + Write("s3.prototxt", base + "type: \"KFAC\"\npipeline_param { }\n"),
              {"K-FAC solver's true Fisher", "TRUE_FISHER"});
  ExpectError("train --snapshot=x.solverstate --solver=" + Write("s4.prototxt", base + "pipeline_param { }\n"),
              {"x.solverstate"});
  const std::string gamma0 = Write("gamma0.prototxt", Replace(kNet,
      R"(layer { name: "ip")",
      R"(layer { name: "rev" type: "Reversible" bottom: "x" top: "x1" reversible_param { gamma: 0 streams: 3
            step { layer { name: "s" type: "InnerProduct" bottom: "in" top: "t" inner_product_param { num_output: 1 } } } } }
layer { name: "ip")"));
  ExpectError("train --solver=" + Write("s5.prototxt", "net: \"" + gamma0 + "\"\nbase_lr: 0.01\nmax_iter: 2\n" +
                                        "pipeline_param { }\n"),
              {"gamma"});
  const std::string log = dir_ / "ok.log";
  const int status = Shell("cd " + dir_.path() + " && " + kStrata + " train --solver=" +
                           Write("ok.prototxt", base + "iter_size: 2\npipeline_param { }\n") + " 2> " + log);
  const std::string err = ReadAll(log);
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("Pipeline: 1 stage(s) x 1 replica(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("Pipeline stages:"), std::string::npos) << err;
  // A pipeline snapshots and resumes (tests/mpi/test_composability.cpp checks the resumed run on several ranks).
  const std::string snap = Write("snap.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 2\nsnapshot: 1\n" +
                                 "snapshot_prefix: \"" + dir_ / "pipe" + "\"\npipeline_param { }\n");
  EXPECT_EQ(Shell("cd " + dir_.path() + " && " + kStrata + " train --solver=" + snap + " 2> " + log), 0) << ReadAll(log);
  EXPECT_EQ(Shell("cd " + dir_.path() + " && " + kStrata + " train --solver=" + snap + " --snapshot=" + dir_ / "pipe" +
                  "_iter_1.solverstate 2> " + log), 0)
      << ReadAll(log);
  EXPECT_NE(ReadAll(log).find("Restoring previous solver status"), std::string::npos) << ReadAll(log);
  // strata time per stage: the table on standard output; its errors as train's.
  const std::string out = dir_ / "time.out";
  EXPECT_EQ(Shell("cd " + dir_.path() + " && " + kStrata + " time --model=" + net +
                  " --pipeline_stages=1 --micro_batches=2 --iterations=2 --warmup=1 > " + out + " 2> " + log), 0)
      << ReadAll(log);
  const std::string table = ReadAll(out);
  EXPECT_NE(table.find("1 stage(s), 2 micro-batches of 2 per iteration, SYNC, 2 iteration(s)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("compute ms/it"), std::string::npos) << table;
  ExpectError("time --model=" + net + " --pipeline_stages=2", {"2 stages x 1 replicas, but the job has 1 ranks"});
  ExpectError("time --model=" + net + " --pipeline_stages=1 --schedule=LATER", {"--schedule must be SYNC or ASYNC"});
  ExpectError("time --model=" + net + " --pipeline_stages=1 --pipeline_cut=nope", {"names 1 cut(s) for 1 stages"});
}

// The GPU gradient path's NCCL asked for in CPU training: one clear error (--timeline makes one rank run
// DataParallelEngine, where the path is chosen).
TEST_F(StrataTool, NcclGradientPathInCpuTraining) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string solver = Write("nccl_solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 2\n"
                                   "comm_param { gpu_path: NCCL }\n");
  ExpectError("train --timeline=" + dir_ / "timeline.json" + " --solver=" + solver,
              {"comm_param.gpu_path NCCL applies to GPU training"});
}

TEST_F(StrataTool, TestWithCorruptWeights) {
  const std::string net = Write("net.prototxt", WithDummyData(kNet));
  const std::string weights = Write("w.caffemodel", "\x0a\x04tiny\x3a\xff\xff");  // truncated NetParameter
  ExpectError("test --model=" + net + " --weights=" + weights + " --iterations=1", {"w.caffemodel"});
  ExpectError("test --model=" + net + " --weights=" + dir_ / "missing.caffemodel" + " --iterations=1",
              {"missing.caffemodel"});
}

// Weights that set nothing of the net (an empty file, another net's) are an error for test and train; weights
// that leave some layers with parameters unset are a warning, or an error with --strict_weights.
TEST_F(StrataTool, WeightsThatSetNothingAreAnError) {
  const std::string net = Write("net.prototxt", WithDummyData(kNet));
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 1\n"
                                   "snapshot_prefix: \"" + dir_ / "tiny" + "\"\n");
  ASSERT_EQ(Shell(kStrata + " train --solver=" + solver + " > " + dir_ / "out" + " 2>&1"), 0) << ReadAll(dir_ / "out");
  const std::string tiny = dir_ / "tiny_iter_1.caffemodel";
  const std::string other_net = Write("other.prototxt", Replace(Replace(kNet, "\"ip\"", "\"fc\""), "tiny", "other"));
  const std::string other_solver = Write("other_solver.prototxt", "net: \"" + other_net + "\"\nbase_lr: 0.01\n"
                                         "max_iter: 1\nsnapshot_prefix: \"" + dir_ / "other" + "\"\n");
  ASSERT_EQ(Shell(kStrata + " train --solver=" + other_solver + " > " + dir_ / "out" + " 2>&1"), 0)
      << ReadAll(dir_ / "out");
  const std::string other = dir_ / "other_iter_1.caffemodel";
  const std::string empty = Write("empty.caffemodel", "");
  for (const std::string& w : {empty, other}) {
    ExpectError("test --model=" + net + " --weights=" + w + " --iterations=1", {w, "set no layer of net 'tiny'"});
    ExpectError("train --solver=" + solver + " --weights=" + w, {w, "set no layer of net 'tiny'"});
  }
  ExpectError("train --solver=" + solver + " --weights=", {"--weights names no file"});
  // A net with one more layer: the weights set 'ip' but not 'ip2'.
  const std::string bigger = Write("bigger.prototxt", Replace(Replace(WithDummyData(kNet), "bottom: \"z\" bottom", "bottom: \"z2\" bottom"),
      "layer { name: \"loss\"", "layer { name: \"ip2\" type: \"InnerProduct\" bottom: \"z\" top: \"z2\" "
      "inner_product_param { num_output: 4 } }\nlayer { name: \"loss\""));
  const std::string out = dir_ / "partial";
  EXPECT_EQ(Shell(kStrata + " test --model=" + bigger + " --weights=" + tiny + " --iterations=1 > " + out + " 2>&1"), 0)
      << ReadAll(out);
  EXPECT_NE(ReadAll(out).find("set no weights for layer(s) 'ip2'"), std::string::npos) << ReadAll(out);
  ExpectError("test --strict_weights --model=" + bigger + " --weights=" + tiny + " --iterations=1",
              {"'ip2'", "--strict_weights"});
}

// Caffe's solver-level `weights` (fine-tuning) loads before iteration 1 with --weights' checks; as in `caffe
// train`, --weights replaces it and --snapshot drops it. Snapshots in HDF5 (Caffe's .h5 names) train, test and
// resume like binary ones.
TEST_F(StrataTool, SolverWeightsFieldFineTunes) {
  const std::string net = Write("net.prototxt", WithDummyData(kNet));
  const std::string base = "net: \"" + net + "\"\nmax_iter: 1\nrandom_seed: 5\n";
  const std::string out = dir_ / "out";
  ASSERT_EQ(Shell(kStrata + " train --solver=" + Write("a.prototxt", base + "base_lr: 0.5\nsnapshot_prefix: \"" +
                                                       dir_ / "a" + "\"\nsnapshot_format: HDF5\n") +
                  " > " + out + " 2>&1"), 0) << ReadAll(out);
  const std::string a = dir_ / "a_iter_1.caffemodel.h5";
  ASSERT_TRUE(std::filesystem::exists(dir_ / "a_iter_1.solverstate.h5"));
  EXPECT_EQ(Shell(kStrata + " test --model=" + net + " --weights=" + a + " --iterations=1 > " + out + " 2>&1"), 0)
      << ReadAll(out);
  // Fine-tuned at base_lr 0, the snapshot holds exactly the weights the field named.
  const std::string ft = Write("ft.prototxt", base + "base_lr: 0\nweights: \"" + a +
                                                  "\"\nsnapshot_prefix: \"" + dir_ / "ft" + "\"\n");
  ASSERT_EQ(Shell(kStrata + " train --solver=" + ft + " > " + out + " 2>&1"), 0) << ReadAll(out);
  EXPECT_NE(ReadAll(out).find("Initialising from " + a), std::string::npos) << ReadAll(out);
  NetParameter from, tuned;
  ReadNetParamsFromBinaryFile(a, &from);
  ReadNetParamsFromBinaryFile(dir_ / "ft_iter_1.caffemodel", &tuned);
  auto ip = [](const NetParameter& w, int b) {
    for (const LayerParameter& layer : w.layer()) {
      if (layer.name() == "ip" && layer.blobs_size() > b) return std::vector<float>(layer.blobs(b).data().begin(), layer.blobs(b).data().end());
    }
    return std::vector<float>();
  };
  for (int b = 0; b < 2; ++b) {
    EXPECT_FALSE(ip(from, b).empty());
    EXPECT_EQ(ip(tuned, b), ip(from, b)) << "blob " << b;
  }
  // Weights of another net in the field: --weights' error; --weights replaces the field, --snapshot drops it.
  NetParameter other;
  other.set_name("other");
  other.add_layer()->set_name("fc");
  WriteProtoToBinaryFile(other, dir_ / "other.caffemodel");
  const std::string bad = Write("bad.prototxt", base + "base_lr: 0\nweights: \"" + dir_ / "other.caffemodel" +
                                                    "\"\nsnapshot_prefix: \"" + dir_ / "bad" + "\"\n");
  ExpectError("train --solver=" + bad, {dir_ / "other.caffemodel", "set no layer of net 'tiny'"});
  EXPECT_EQ(Shell(kStrata + " train --solver=" + bad + " --weights=" + a + " > " + out + " 2>&1"), 0) << ReadAll(out);
  EXPECT_EQ(Shell(kStrata + " train --solver=" + bad + " --iterations=2 --snapshot=" + dir_ / "a_iter_1.solverstate.h5" +
                  " > " + out + " 2>&1"), 0) << ReadAll(out);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "bad_iter_2.caffemodel"));
}

// Nets that would run and do nothing, or abort in a CHECK, are one error before any work.
TEST_F(StrataTool, EmptyAndZeroSizedNetsAreErrors) {
  const std::string empty = Write("empty.prototxt", "name: \"nothing\"\n");
  for (const char* command : {"time", "plan"}) {
    ExpectError(std::string(command) + " --model=" + empty, {"'nothing'", "no layers"});
  }
  const std::string solver = Write("empty_solver.prototxt", "net: \"" + empty + "\"\nbase_lr: 0.01\nmax_iter: 2\n");
  ExpectError("train --solver=" + solver, {"'nothing'", "no layers"});
  // Layers, but nothing to learn and no loss.
  const std::string idle = Write("idle.prototxt", "name: \"idle\"\nlayer { name: \"in\" type: \"Input\" top: \"x\" "
                                 "input_param { shape { dim: 2 dim: 3 } } }\n"
                                 "layer { name: \"r\" type: \"ReLU\" bottom: \"x\" top: \"y\" }\n");
  ExpectError("train --solver=" + Write("idle_solver.prototxt", "net: \"" + idle + "\"\nbase_lr: 0.01\nmax_iter: 2\n"),
              {"'idle'", "nothing to train"});
  // An Input dimension of 0 feeding a convolution: the layer and the top are named, for every command.
  const std::string zero = Write("zero.prototxt", R"(name: "zero"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 0 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 4 kernel_size: 3 } }
)");
  for (const char* command : {"time", "plan"}) {
    ExpectError(std::string(command) + " --model=" + zero, {"layer 'in' (Input)", "top 'x'", "2 0 8 8"});
  }
  ExpectError("test --model=" + zero + " --weights=" + Write("w.caffemodel", "") + " --iterations=1",
              {"layer 'in' (Input)", "top 'x'"});
}

// test_interval 0 with a test net: Caffe's "never test", kept so Caffe solvers load, with one warning line.
TEST_F(StrataTool, TestIntervalZeroWithTestNetsWarns) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\ntest_iter: 1\ntest_interval: 0\n"
                                   "base_lr: 0.01\nmax_iter: 1\nsnapshot_after_train: false\n");
  const std::string out = dir_ / "out";
  EXPECT_EQ(Shell(kStrata + " train --solver=" + solver + " > " + out + " 2>&1"), 0) << ReadAll(out);
  const std::string log = ReadAll(out);
  const size_t at = log.find("test_interval is 0");
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find("test_interval is 0", at + 1), std::string::npos) << "more than one warning:\n" << log;
}

TEST_F(StrataTool, PlanPrintsEveryPlannerAndRefusesInfeasibleBudgets) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string out = dir_ / "stdout";
  EXPECT_EQ(Shell(kStrata + " plan --model=" + net + " --budget=1.0 > " + out + " 2> /dev/null"), 0);
  const std::string table = ReadAll(out);
  for (const char* p : {"store_all", "sqrt", "dp_memory", "peak activation", "recompute"})
    EXPECT_NE(table.find(p), std::string::npos) << p << " not in:\n" << table;
  ExpectError("plan --model=" + net + " --budget=1", {"memory budget 1 bytes", "smallest feasible budget is"});
  ExpectError("plan --model=" + net, {"--budget"});
  ExpectError("plan --model=" + net + " --budget=lots", {"--budget", "lots"});
  ExpectError("plan --model=" + net + " --budget=0.5 --planner=magic", {"--planner", "magic"});
  ExpectError("time --model=" + net + " --iterations=1 --budget=1 --planner=dp",
              {"memory budget 1 bytes", "smallest feasible budget is"});
}

TEST_F(StrataTool, TimeUnderAPlanMeasuresWithinThePrediction) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string out = dir_ / "stdout";
  ASSERT_EQ(Shell(kStrata + " time --model=" + net + " --iterations=1 --warmup=1 --budget=0.5 --planner=dp_memory > " +
                  out + " 2> /dev/null"),
            0);
  const std::string text = ReadAll(out);
  auto number_after = [&](const std::string& key) {
    const size_t at = text.find(key);
    EXPECT_NE(at, std::string::npos) << key << " not in:\n" << text;
    return at == std::string::npos ? 0ull : std::stoull(text.substr(at + key.size()));
  };
  const unsigned long long measured = number_after("Peak activation memory: ");
  const unsigned long long predicted = number_after("predicted peak activation memory ");
  EXPECT_GT(measured, 0u);
  EXPECT_LE(measured, predicted);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST_F(StrataTool, ScalePredictsEveryNodeCountAndWritesItsInputs) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string times = Write("net.times", "batch 2\nin 0 0\nip 1.5 3\nloss 0.5 0.25\n");
  const std::string machine = Write("m.machine", "alpha_us 10\nbandwidth_GBps 1\nreduce_GBps 4\ncores 4\n");
  const std::string trace = dir_ / "scale.json";
  EXPECT_EQ(Shell(kStrata + " scale --model=" + net + " --times=" + times + " --network=" + machine +
                  " --nodes=1,2,...,16 --batch=4 --timeline=" + trace + " --times_out=" + dir_ / "again.times" +
                  " > " + dir_ / "out" + " 2>&1"),
            0)
      << ReadAll(dir_ / "out");
  const std::string out = ReadAll(dir_ / "out");
  // Batch 4 doubles the file's times (batch 2): 2 x 5.25 ms a rank, and the rows for 1, 2, 4, 8 and 16 nodes.
  EXPECT_NE(out.find("forward+backward 10.50 ms"), std::string::npos) << out;
  for (const char* row : {"| 1 | 1 | 10.50 |", "| 2 | 2 |", "| 4 | 4 |", "| 8 | 8 |", "| 16 | 16 |"})
    EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
  EXPECT_NE(out.find("| ip |"), std::string::npos) << out;
  EXPECT_NE(ReadAll(trace).find("communication thread 1"), std::string::npos);
  EXPECT_NE(ReadAll(dir_ / "again.times").find("ip 1.5 3"), std::string::npos) << ReadAll(dir_ / "again.times");
  // Measured here when no times are given.
  EXPECT_EQ(Shell(kStrata + " scale --model=" + net + " --iterations=2 --nodes=1,4 > " + dir_ / "out" + " 2>&1"), 0)
      << ReadAll(dir_ / "out");
  EXPECT_NE(ReadAll(dir_ / "out").find("measured here"), std::string::npos);
}

TEST_F(StrataTool, ScaleRefusesBadInputBeforeSimulating) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string times = Write("net.times", "batch 2\nin 0 0\nip 1.5 3\nloss 0.5 0.25\n");
  ExpectError("scale --times=" + times, {"--model"});
  ExpectError("scale --model=" + net + " --times=" + times + " --nodes=4,2", {"--nodes", "increase"});
  ExpectError("scale --model=" + net + " --times=" + Write("short.times", "batch 2\nip 1 2\n"),
              {"short.times", "no times for layer 'in'"});
  ExpectError("scale --model=" + net + " --times=" + times + " --network=" + Write("bad.machine", "speed 3\n"),
              {"bad.machine:1", "unknown key 'speed'"});
  ExpectError("scale --model=" + net + " --times=" + times + " --network=" + dir_ / "none.machine", {"none.machine"});
  ExpectError("scale --model=" + net + " --times=" + times + " --allreduce=mpi", {"no shape", "mpi"});
  ExpectError("scale --model=" + net + " --times=" + times + " --dispatch=fastest", {"--dispatch"});
}

// What only the program can check, before any work: the machine (solver_mode: GPU without a GPU, an error as
// --gpu is; where there is a GPU the solver trains on it), the solver file (named in its settings' messages), and
// `strata test` of a deploy net, whose Input layers nothing would fill.
TEST_F(StrataTool, SettingsCheckedBeforeAnyWork) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string base = "net: \"" + net + "\"\nmax_iter: 1\nsnapshot_prefix: \"" + dir_ / "snap" + "\"\n";
  if (gpu_device_count() == 0) {
    const std::string gpu = Write("gpu.prototxt", base + "base_lr: 0.01\nsolver_mode: GPU\n");
    ExpectError("train --solver=" + gpu, {"solver_mode: GPU", gpu_build() ? "finds no GPU" : "has no GPU support",
                                          "set solver_mode: CPU in " + gpu});
  }
  const std::string negative = Write("negative.prototxt", base + "base_lr: -0.01\n");
  ExpectError("train --solver=" + negative, {negative + ": base_lr is -0.01"});
  ExpectError("test --model=" + net + " --weights=" + dir_ / "w.caffemodel",
              {net, "net 'tiny' reads its input 'x', 'y' from Input layers", "strata test cannot fill"});
}

// SIGTERM inside an iteration of 16 million micro-batches (minutes of work): the run ends at once, status 0 as for
// any requested stop, the iteration dropped and no final snapshot written (it would not resume exactly).
TEST_F(StrataTool, SigtermEndsALongIterationAtOnce) {
  const std::string net = Write("net.prototxt", kNet);
  const std::string solver = Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nmax_iter: 10\n"
                                   "iter_size: 16000000\nsnapshot_prefix: \"" + dir_ / "snap" + "\"\n");
  const std::string log = dir_ / "train.log";
  const auto start = std::chrono::steady_clock::now();
  const int status = Shell("timeout --preserve-status -k 30 -s TERM 5 " + kStrata + " train --solver=" + solver +
                           " > " + log + " 2>&1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status, 0) << ReadAll(log);
  EXPECT_LT(seconds, 25) << ReadAll(log);
  EXPECT_NE(ReadAll(log).find("Stopped inside iteration 0 (iter_size 16000000): that iteration is dropped"),
            std::string::npos) << ReadAll(log);
  EXPECT_NE(ReadAll(log).find("Optimization stopped early"), std::string::npos) << ReadAll(log);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "snap_iter_0.caffemodel"));
}

}  // namespace
}  // namespace strata
