// Every layer's GPU forward and backward against its CPU version on random data, GPU gradient checks in double,
// and the solver's GPU update against the CPU's. They need a GPU: on a machine without one (or in a CPU-only
// build) each test skips with a message saying so, and they run for real on a GPU machine (docs/gpu.md).
//
// The comparison is the normalised error ||gpu - cpu|| / ||cpu||, per top, bottom gradient and parameter
// gradient. The bound is 1e-5 in float for the exact algorithms (TF32 stays off in these tests): the two sides
// differ only in the order of their sums and in the last bits of exp/tanh. Convolution's bound is 1e-4: cuDNN may
// pick a Winograd or FFT algorithm, exact in exact arithmetic but with larger float rounding.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "finite_cases.hpp"
#include "gpu_layer_compare.hpp"
#include "strata/device.hpp"
#include "strata/layer_factory.hpp"
#include "strata/memory_tracker.hpp"
#include "strata/net.hpp"
#include "strata/solver.hpp"
#include "strata/syncedmem.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using gpu_compare::CompareWithCpu;
using gpu_compare::Copy;
using gpu_compare::GpuTest;
using gpu_compare::LayerCase;
using gpu_compare::NormalisedError;


std::vector<LayerCase> LeNetCases() {
  return {
      {R"(name: "max2s2p1_mask" type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 })",
       {{2, 3, 7, 6}}, 2},
      // STOCHASTIC on positive inputs (activations after a ReLU): TRAIN must pick what the CPU picks.
      {R"(name: "stochastic_train" type: "Pooling" phase: TRAIN pooling_param { pool: STOCHASTIC kernel_size: 3
          stride: 2 })", {{2, 3, 9, 8}}, 1, -1, 0, false, 1e-5, 0.1, 1},
      {R"(name: "stochastic_test" type: "Pooling" phase: TEST pooling_param { pool: STOCHASTIC kernel_size: 2
          stride: 2 })", {{2, 3, 8, 8}}, 1, -1, 0, false, 1e-5, 0.1, 1},
      {R"(name: "loss" type: "SoftmaxWithLoss")", {{6, 10}, {6}}, 1, 1, 10},
      {R"(name: "loss_probs" type: "SoftmaxWithLoss" loss_weight: 1 loss_weight: 0)", {{6, 10}, {6}}, 2, 1, 10},
      {R"(name: "loss_spatial_ignore" type: "SoftmaxWithLoss" loss_param { ignore_label: 2 })",
       {{2, 4, 3, 3}, {2, 3, 3}}, 1, 1, 4},
  };
}

std::vector<LayerCase> AlexNetResNetCases() {
  return {
      {R"(name: "lrn_within" type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75
          norm_region: WITHIN_CHANNEL })",
       {{2, 3, 5, 5}}},
      {R"(name: "dropout" type: "Dropout" phase: TRAIN dropout_param { dropout_ratio: 0.4 })", {{3, 7, 5}}},
      {R"(name: "dropout_in_place" type: "Dropout" phase: TRAIN)", {{4, 33}}, 1, -1, 0, true},
      {R"(name: "dropout_test" type: "Dropout" phase: TEST)", {{4, 33}}},
      {R"(name: "concat" type: "Concat")", {{2, 3, 4, 5}, {2, 2, 4, 5}, {2, 1, 4, 5}}},
      {R"(name: "concat_axis0" type: "Concat" concat_param { axis: 0 })", {{2, 3, 4}, {1, 3, 4}}},
      {R"(name: "split" type: "Split")", {{2, 3, 4, 5}}, 3},
      {R"(name: "bn_global" type: "BatchNorm" phase: TRAIN batch_norm_param { use_global_stats: true })",
       {{4, 3, 5, 4}}},
      {R"(name: "scale" type: "Scale" scale_param { bias_term: true
          filler { type: "uniform" min: -1 max: 1 } bias_filler { type: "uniform" min: -1 max: 1 } })",
       {{2, 3, 5, 4}}},
      {R"(name: "scale_2bottoms" type: "Scale" scale_param { axis: 0 })", {{2, 3, 5, 4}, {2, 3}}},
      {R"(name: "bias" type: "Bias" bias_param { filler { type: "uniform" min: -1 max: 1 } })", {{2, 3, 5, 4}}},
      {R"(name: "eltwise_sum" type: "Eltwise" eltwise_param { operation: SUM coeff: 1 coeff: -0.5 })",
       {{2, 3, 4, 5}, {2, 3, 4, 5}}},
      {R"(name: "eltwise_prod" type: "Eltwise" eltwise_param { operation: PROD })",
       {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}}},
      {R"(name: "eltwise_max" type: "Eltwise" eltwise_param { operation: MAX })", {{2, 3, 4, 5}, {2, 3, 4, 5}}},
      {R"(name: "flatten" type: "Flatten")", {{2, 3, 4, 5}}},
      {R"(name: "slice_points" type: "Slice" slice_param { slice_point: 1 slice_point: 4 })", {{2, 6, 3, 4}}, 3},
      {R"(name: "slice_axis0" type: "Slice" slice_param { axis: 0 })", {{4, 3, 5}}, 2},
      {R"(name: "upsample" type: "Upsample")", {{2, 3, 4, 5}}},
      {R"(name: "batch_reindex" type: "BatchReindex")", {{4, 3, 2, 2}, {7}}, 1, 1, 4},
  };
}

TEST_F(GpuTest, LeNetLayersMatchCpu) {
  for (const auto& c : LeNetCases()) CompareWithCpu(c);
}

TEST_F(GpuTest, AlexNetAndResNetLayersMatchCpu) {
  for (const auto& c : AlexNetResNetCases()) CompareWithCpu(c);
}

// Finite differences of the GPU forward against the GPU backward, in double.
TEST_F(GpuTest, GradientChecks) {
  // The loss, with labels as the second bottom (no gradient).
  gpu_compare::GradientCase loss{R"(name: "loss" type: "SoftmaxWithLoss")", {{4, 5}, {4}}, 0};
  loss.fill = [](const std::vector<Blob<double>*>& b) {
    for (int i = 0; i < 4; ++i) b[1]->mutable_cpu_data()[i] = (i * 3) % 5;
  };
  loss.lo = -2;
  loss.hi = 2;
  gpu_compare::GpuGradientCheck(loss);
}

// Blob arithmetic runs where the data is, and gives the CPU's results.
TEST_F(GpuTest, BlobArithmeticOnDevice) {
  Strata::set_mode(Strata::GPU);
  Blob<float> b({1000});
  rng_uniform<float>(b.count(), -1, 1, b.mutable_cpu_data());
  rng_uniform<float>(b.count(), -1, 1, b.mutable_cpu_diff());
  const std::vector<float> x = Copy(b.cpu_data(), b.count()), d = Copy(b.cpu_diff(), b.count());
  double asum = 0, sumsq = 0;
  for (float v : d) {
    asum += std::fabs(v);
    sumsq += double(v) * v;
  }
  b.mutable_gpu_diff();  // move the head to the device
  EXPECT_NEAR(b.asum_diff(), asum, 1e-3);
  b.mutable_gpu_diff();
  EXPECT_NEAR(b.sumsq_diff(), sumsq, 1e-3);
  b.mutable_gpu_data();
  b.Update();
  EXPECT_EQ(b.data()->head(), SyncedMemory::HEAD_AT_GPU);
  for (int i = 0; i < b.count(); ++i) ASSERT_NEAR(b.cpu_data()[i], x[i] - d[i], 1e-6);
  b.mutable_gpu_diff();
  b.scale_diff(2.f);
  for (int i = 0; i < b.count(); ++i) ASSERT_FLOAT_EQ(b.cpu_diff()[i], 2 * d[i]);
}

// The loss scale's check of a net's gradients: every span on the device at once.
TEST_F(GpuTest, AllFiniteFindsEveryInfAndNaNOnTheDevice) {
#ifdef STRATA_USE_CUDA
  finite_cases::ExpectFindsEveryNonFinite<float>([](const finite_cases::Spans<float>& spans) {
    std::vector<std::unique_ptr<Blob<float>>> blobs;
    std::vector<std::pair<const float*, size_t>> device;
    for (const auto& s : spans) {
      blobs.push_back(std::make_unique<Blob<float>>(std::vector<int>{static_cast<int>(s.size())}));
      if (!s.empty()) std::copy(s.begin(), s.end(), blobs.back()->mutable_cpu_data());
      device.emplace_back(s.empty() ? nullptr : blobs.back()->gpu_data(), s.size());
    }
    return gpu_all_finite(device);
  });
#endif
}

// Device memory is counted by category, apart from the host's: `strata time --gpu` reports the device's peak.
TEST_F(GpuTest, DeviceMemoryIsCountedApartFromTheHosts) {
  using MT = MemoryTracker;
  const size_t act = MT::current(MemoryCategory::kActivation, MemorySpace::kDevice);
  const size_t work = MT::current(MemoryCategory::kWorkspace, MemorySpace::kDevice);
  const size_t host = MT::current(MemoryCategory::kActivation);
  {
    SyncedMemory m(4096, MemoryCategory::kActivation);
    m.mutable_gpu_data();
    EXPECT_EQ(MT::current(MemoryCategory::kActivation, MemorySpace::kDevice), act + 4096);
    EXPECT_EQ(MT::current(MemoryCategory::kActivation), host);
    m.cpu_data();  // a host copy too: counted on the host
    EXPECT_EQ(MT::current(MemoryCategory::kActivation), host + 4096);
    m.set_category(MemoryCategory::kWorkspace);
    EXPECT_EQ(MT::current(MemoryCategory::kActivation, MemorySpace::kDevice), act);
    EXPECT_EQ(MT::current(MemoryCategory::kWorkspace, MemorySpace::kDevice), work + 4096);
  }
  EXPECT_EQ(MT::current(MemoryCategory::kWorkspace, MemorySpace::kDevice), work);
  EXPECT_EQ(MT::current(MemoryCategory::kActivation), host);
}

// A few steps of every solver of the SGD family on a small net on the GPU land where the CPU's do, and the
// weights stay on the device.
TEST_F(GpuTest, SolverStepsMatchCpu) {
  const std::string net = R"(
    name: "tiny"
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 8 dim: 2 dim: 6 dim: 6 } shape { dim: 8 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
    layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
            inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )";
  for (const std::string type : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    SCOPED_TRACE(type);
    std::vector<std::vector<float>> results[2];
    for (int mode = 0; mode < 2; ++mode) {
      Strata::set_mode(mode == 0 ? Strata::CPU : Strata::GPU);
      SolverParameter sp;
      ReadProtoFromTextString(net, sp.mutable_net_param());
      sp.set_type(type);
      sp.set_base_lr(type == "AdaDelta" ? 1.f : 0.1f);
      sp.set_momentum(type == "AdaGrad" || type == "RMSProp" ? 0.f : 0.9f);
      sp.set_weight_decay(0.01f);
      sp.set_lr_policy("fixed");
      sp.set_max_iter(5);
      sp.set_random_seed(7);
      sp.set_snapshot_after_train(false);
      sp.set_display(0);
      auto solver = SolverRegistry<float>::Create(sp);
      // The same inputs for both modes.
      std::mt19937 gen(11);
      std::uniform_real_distribution<float> u(-1, 1);
      Blob<float>* data = solver->net()->blobs()[0].get();
      Blob<float>* label = solver->net()->blobs()[1].get();
      for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data()[i] = u(gen);
      for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = static_cast<float>(i % 3);
      solver->Solve();
      for (Blob<float>* p : solver->net()->learnable_params()) {
        if (mode == 1) {
          EXPECT_EQ(p->data()->head(), SyncedMemory::HEAD_AT_GPU) << "weights were copied to the host";
        }
        results[mode].push_back(Copy(p->cpu_data(), p->count()));
      }
    }
    Strata::set_mode(Strata::CPU);
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k) {
      const double err = NormalisedError(results[1][k].data(), results[0][k].data(), results[0][k].size());
      EXPECT_LT(err, 1e-4) << "param " << k;  // the net has a Convolution: its bound (above)
      std::printf("[gpu-vs-cpu] %s 5 steps param #%zu normalised error %.3g\n", type.c_str(), k, err);
    }
  }
}

// BatchNorm absorbs the Scale and ReLU after it, a sum its ReLU and a convolution its ReLU (Layer::Absorb), on the
// GPU as on the CPU: a few SGD steps of a net with every form (Scale with and without bias, ReLU plain and leaky,
// a sum of two and of three with coefficients, a convolution with bias and ReLU) land on the GPU where they land on
// the CPU, fused and not, and the running statistics agree too.
TEST_F(GpuTest, FusedBatchNormScaleReluTrainsAsOnTheCpu) {
  const std::string net = R"(
    name: "fused"
    layer { name: "x" type: "Input" top: "x" top: "y"
            input_param { shape { dim: 8 dim: 3 dim: 10 dim: 10 } shape { dim: 8 } } }
    layer { name: "c1" type: "Convolution" bottom: "x" top: "c1"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
    layer { name: "bn1" type: "BatchNorm" bottom: "c1" top: "c1" }
    layer { name: "s1" type: "Scale" bottom: "c1" top: "c1" scale_param { bias_term: true } }
    layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
    layer { name: "c2" type: "Convolution" bottom: "c1" top: "c2"
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
    layer { name: "bn2" type: "BatchNorm" bottom: "c2" top: "b2" }
    layer { name: "s2" type: "Scale" bottom: "b2" top: "b2" scale_param { bias_term: false } }
    layer { name: "r2" type: "ReLU" bottom: "b2" top: "b2" relu_param { negative_slope: 0.1 } }
    layer { name: "sum2" type: "Eltwise" bottom: "b2" bottom: "c1" top: "sum2" }
    layer { name: "sr2" type: "ReLU" bottom: "sum2" top: "sum2" }
    layer { name: "c3" type: "Convolution" bottom: "sum2" top: "c3"
            convolution_param { num_output: 16 kernel_size: 1 bias_term: false weight_filler { type: "msra" } } }
    layer { name: "bn3" type: "BatchNorm" bottom: "c3" top: "c3" }
    layer { name: "s3" type: "Scale" bottom: "c3" top: "c3" scale_param { bias_term: true } }
    layer { name: "sum3" type: "Eltwise" bottom: "c3" bottom: "sum2" bottom: "c1" top: "sum3"
            eltwise_param { operation: SUM coeff: 1 coeff: 0.5 coeff: -1 } }
    layer { name: "sr3" type: "ReLU" bottom: "sum3" top: "sum3" relu_param { negative_slope: 0.2 } }
    layer { name: "c4" type: "Convolution" bottom: "sum3" top: "c4"
            convolution_param { num_output: 16 kernel_size: 1 weight_filler { type: "msra" }
                                bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "r4" type: "ReLU" bottom: "c4" top: "c4" }
    layer { name: "pool" type: "Pooling" bottom: "c4" top: "pool" pooling_param { pool: AVE global_pooling: true } }
    layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
            inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "y" top: "loss" }
  )";
  struct Run {
    std::vector<float> losses;
    std::vector<std::vector<float>> params;  // every parameter blob, the statistics included
    std::vector<std::string> absorbed;
  };
  const auto train = [&](Strata::Mode mode, bool fuse) {
    const bool fusion_before = Net<float>::layer_fusion_enabled();
    Net<float>::set_layer_fusion_enabled(fuse);
    Strata::set_mode(mode);
    SolverParameter sp;
    ReadProtoFromTextString(net, sp.mutable_net_param());
    sp.mutable_net_param()->mutable_state()->set_phase(TRAIN);
    sp.set_base_lr(0.1f);
    sp.set_momentum(0.9f);
    sp.set_lr_policy("fixed");
    sp.set_max_iter(100);
    sp.set_random_seed(1701);
    sp.set_snapshot_after_train(false);
    sp.set_display(0);
    auto solver = SolverRegistry<float>::Create(sp);
    Net<float>::set_layer_fusion_enabled(fusion_before);
    Net<float>& n = *solver->net();
    std::mt19937 gen(3);
    std::normal_distribution<float> gauss(0.f, 1.f);
    Blob<float>* x = n.blob_by_name("x").get();
    for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = gauss(gen);
    for (int i = 0; i < 8; ++i) n.blob_by_name("y")->mutable_cpu_data()[i] = static_cast<float>(i % 4);
    Run run;
    for (int step = 0; step < 6; ++step) {
      solver->Step(1);
      run.losses.push_back(n.blob_by_name("loss")->cpu_data()[0]);
    }
    for (const auto& blob : n.params()) run.params.push_back(Copy(blob->cpu_data(), blob->count()));
    for (const auto& layer : n.layers()) {
      if (layer->absorbed()) run.absorbed.push_back(layer->layer_param().name());
    }
    Strata::set_mode(Strata::CPU);
    return run;
  };
  const Run cpu = train(Strata::CPU, true);
  EXPECT_EQ(cpu.absorbed, (std::vector<std::string>{"s1", "r1", "s2", "r2", "sr2", "s3", "sr3", "r4"}));
  // The run moves (the loss by more than 2% over the steps), or the comparison would say little; whether it
  // falls in so few steps depends on the machine's kernels (their rounding), so only the change is asked for.
  EXPECT_GT(std::fabs(cpu.losses.back() - cpu.losses.front()), 0.02f * cpu.losses.front());
  for (const bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "separate layers");
    const Run gpu = train(Strata::GPU, fuse);
    EXPECT_EQ(gpu.absorbed.empty(), !fuse);
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t s = 0; s < cpu.losses.size(); ++s) {
      EXPECT_NEAR(gpu.losses[s], cpu.losses[s], 1e-4 * std::fabs(cpu.losses[s])) << "step " << s;
    }
    ASSERT_EQ(gpu.params.size(), cpu.params.size());
    for (size_t k = 0; k < cpu.params.size(); ++k) {
      const double err = NormalisedError(gpu.params[k].data(), cpu.params[k].data(),
                                         static_cast<int>(cpu.params[k].size()));
      EXPECT_LT(err, 1e-4) << "parameter blob " << k;  // the net has convolutions: their bound (above)
      std::printf("[gpu-vs-cpu] %s 6 steps param #%zu normalised error %.3g\n", fuse ? "fused" : "separate", k, err);
    }
  }
}

// Where there is no GPU (this machine, CI), asking for one ends the tools with one clear error, not a crash
// (solver_mode GPU without --gpu too: StrataTool.SettingsCheckedBeforeAnyWork).
TEST(GpuTools, AskingForAMissingGpuIsOneClearError) {
  if (gpu_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const std::string bin = std::string(STRATA_BINARY_DIR) + "/bin/strata";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "the strata tool is not built";
  const std::string log = (std::filesystem::temp_directory_path() / "strata_gpu_tool_test.log").string();
  // Plain device_query describes the CPU and says there are no GPUs (test_onednn_layers.cpp); naming one fails.
  for (const std::string& args : {std::string("device_query --gpu=0"),
                                 "time --model=" + std::string(STRATA_SOURCE_DIR) +
                                     "/models/lenet/deploy.prototxt --gpu=0 --iterations=1"}) {
    const int status = std::system((bin + " " + args + " > " + log + " 2>&1").c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 1) << args;
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("error: "), std::string::npos) << args << ": " << text.str();
    EXPECT_NE(text.str().find("GPU"), std::string::npos) << args << ": " << text.str();
  }
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace strata
