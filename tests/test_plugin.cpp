// Plugins (strata/plugin.hpp): a user's shared library of layers, loaded by the tools. The libraries are built
// beside the tests (CMakeLists.txt): the example's Softsign (examples/custom_layer/softsign_layer.cpp), and one that
// registers a type Strata already has (tests/plugins/duplicate_type_plugin.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "strata/layer_factory.hpp"
#include "strata/net.hpp"
#include "strata/plugin.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using testing_data::ReadAll;
using testing_data::Shell;
using testing_data::TempDir;
using testing_data::WriteFile;

const std::string kSoftsign = std::string(STRATA_BINARY_DIR) + "/lib/libstrata_softsign_plugin.so";
const std::string kDuplicate = std::string(STRATA_BINARY_DIR) + "/lib/libstrata_duplicate_plugin.so";
const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/bin/strata";

std::string Message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// The only test in this binary that loads the Softsign plugin (the tool tests load it in processes of their own).
TEST(Plugin, LoadsItsLayersIntoTheRegistry) {
  ASSERT_FALSE(LayerRegistry<float>::Has("Softsign"));
  EXPECT_EQ(LoadPlugin(kSoftsign), std::vector<std::string>{"Softsign"});
  ASSERT_TRUE(LayerRegistry<double>::Has("Softsign"));

  NetParameter param;
  ReadProtoFromTextString(R"(name: "p" layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
                             layer { name: "s" type: "Softsign" bottom: "x" top: "y" })", &param, "plugin net");
  Net<double> net(param);
  Blob<double>* x = net.blob_by_name("x").get();
  for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = (i - 2.5) * 1.5;
  net.Forward();
  const Blob<double>* y = net.blob_by_name("y").get();
  for (int i = 0; i < x->count(); ++i) {
    const double v = (i - 2.5) * 1.5;
    EXPECT_DOUBLE_EQ(y->cpu_data()[i], v / (1 + std::fabs(v))) << i;
  }
}

TEST(Plugin, ATypeAlreadyKnownIsOneErrorAndLeavesTheRegistryAsItWas) {
  const size_t types = LayerRegistry<float>::LayerTypeList().size();
  const std::string err = Message([] { LoadPlugin(kDuplicate); });
  EXPECT_NE(err.find(kDuplicate), std::string::npos) << err;
  EXPECT_NE(err.find("registers layer type(s) ReLU, which Strata or an earlier plugin already has"),
            std::string::npos) << err;
  EXPECT_FALSE(LayerRegistry<float>::Has("Twin"));  // its other type went out with it
  EXPECT_EQ(LayerRegistry<float>::LayerTypeList().size(), types);
  LayerParameter relu;
  relu.set_name("r");
  relu.set_type("ReLU");
  EXPECT_STREQ(LayerRegistry<float>::CreateLayer(relu)->type(), "ReLU");  // the built-in one, not the plugin's
}

TEST(Plugin, ALibraryThatDoesNotLoadIsOneError) {
  TempDir dir;
  WriteFile(dir / "notalibrary.so", "just text\n");
  std::string err = Message([&] { LoadPlugin(dir / "notalibrary.so"); });
  EXPECT_NE(err.find("plugin " + dir / "notalibrary.so" + " cannot be loaded"), std::string::npos) << err;
  err = Message([&] { LoadPlugin(dir / "missing.so"); });
  EXPECT_NE(err.find("missing.so cannot be loaded"), std::string::npos) << err;
  EXPECT_NE(err.find("No such file"), std::string::npos) << err;
}

TEST(Plugin, TakesEveryPluginFlagOutOfArgvThenTheEnvironment) {
  std::vector<std::string> args = {"strata", "--plugin=a.so,b.so", "train", "--plugin", "c.so", "--solver=s",
                                   "-plugin=d.so"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  ASSERT_EQ(setenv("STRATA_PLUGINS", "e.so::f.so", 1), 0);
  const std::vector<std::string> paths = TakePluginArguments(&argc, argv.data());
  unsetenv("STRATA_PLUGINS");
  EXPECT_EQ(paths, (std::vector<std::string>{"a.so", "b.so", "c.so", "d.so", "e.so", "f.so"}));
  ASSERT_EQ(argc, 3);
  EXPECT_STREQ(argv[1], "train");
  EXPECT_STREQ(argv[2], "--solver=s");
  EXPECT_EQ(argv[3], nullptr);

  std::vector<std::string> dangling = {"strata", "train", "--plugin"};
  std::vector<char*> argv2;
  for (auto& a : dangling) argv2.push_back(a.data());
  argv2.push_back(nullptr);
  argc = 3;
  EXPECT_NE(Message([&] { TakePluginArguments(&argc, argv2.data()); }).find("--plugin needs a library path"),
            std::string::npos);
}

// `strata train` under mpirun with the plugin on every rank, by flag and by environment; without it, or with a
// wrong one, one error line.
TEST(Plugin, TheToolTrainsWithAPluginOnTwoRanks) {
  if (!std::filesystem::exists(kStrata)) GTEST_SKIP() << "strata not built";
  TempDir dir;
  WriteFile(dir / "net.prototxt", R"(name: "softsign_net"
layer { name: "data" type: "DummyData" top: "x" top: "t"
        dummy_data_param { shape { dim: 8 dim: 6 } shape { dim: 8 dim: 4 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "gaussian" std: 0.5 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "soft" type: "Softsign" bottom: "h" top: "s" }
layer { name: "loss" type: "EuclideanLoss" bottom: "s" bottom: "t" top: "loss" }
)");
  WriteFile(dir / "solver.prototxt", "net: \"" + dir / "net.prototxt" +
                                         "\"\nbase_lr: 0.05\nmax_iter: 6\ndisplay: 3\nsnapshot_after_train: false\n"
                                         "random_seed: 3\n");
  const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -np 2 ";
  const std::string train = kStrata + " train --solver=" + dir / "solver.prototxt";
  auto run = [&](const std::string& command, const std::string& log) {
    return Shell("cd " + dir.path() + " && OMPI_MCA_rmaps_base_oversubscribe=1 " + command + " > /dev/null 2> " +
                 dir / log);
  };

  EXPECT_EQ(run(mpirun + train + " --plugin=" + kSoftsign, "flag.log"), 0) << ReadAll(dir / "flag.log");
  const std::string flag_log = ReadAll(dir / "flag.log");
  EXPECT_NE(flag_log.find("Loaded plugin " + kSoftsign + ": layer types Softsign"), std::string::npos) << flag_log;
  EXPECT_NE(flag_log.find("Optimization Done."), std::string::npos) << flag_log;

  EXPECT_EQ(run("STRATA_PLUGINS=" + kSoftsign + " " + mpirun + train, "env.log"), 0) << ReadAll(dir / "env.log");
  EXPECT_NE(ReadAll(dir / "env.log").find("Optimization Done."), std::string::npos);

  EXPECT_EQ(run(train, "none.log"), 1);
  EXPECT_NE(ReadAll(dir / "none.log").find("error: layer 'soft' has unknown type 'Softsign'"), std::string::npos)
      << ReadAll(dir / "none.log");

  EXPECT_EQ(run(train + " --plugin=" + kSoftsign + "," + kDuplicate, "dup.log"), 1);
  const std::string dup = ReadAll(dir / "dup.log");
  std::istringstream lines(dup);
  int errors = 0;
  for (std::string l; std::getline(lines, l);) errors += l.rfind("error: ", 0) == 0;
  EXPECT_EQ(errors, 1) << dup;
  EXPECT_NE(dup.find("error: plugin " + kDuplicate + " registers layer type(s) ReLU"), std::string::npos) << dup;
}

}  // namespace
}  // namespace strata
