// The GPU versions of Caffe's loss layers (EuclideanLoss, SigmoidCrossEntropyLoss, ContrastiveLoss, HingeLoss,
// MultinomialLogisticLoss, InfogainLoss) against their CPU versions, and GPU gradient checks in double. They skip
// without a GPU (gpu_layer_compare.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "gpu_layer_compare.hpp"
#include "strata/util/io.hpp"

namespace strata {
namespace {

using gpu_compare::CompareWithCpu;
using gpu_compare::GpuGradientCheck;
using gpu_compare::GpuTest;
using gpu_compare::GradientCase;
using gpu_compare::LayerCase;

// A K x K infogain matrix of values in [0, 2) written as a binary BlobProto; returns its path.
std::string WriteInfogainMatrix(const testing_data::TempDir& dir, int K) {
  Blob<float> H({1, 1, K, K});
  FillUniform(&H, 0.f, 2.f, 5);
  BlobProto proto;
  H.ToProto(&proto);
  const std::string path = dir / ("H" + std::to_string(K) + ".binaryproto");
  WriteProtoToBinaryFile(proto, path);
  return path;
}

TEST_F(GpuTest, LossLayersMatchCpu) {
  testing_data::TempDir dir;
  const std::string h10 = WriteInfogainMatrix(dir, 10), h4 = WriteInfogainMatrix(dir, 4);
  // Label bottoms are drawn from [0, label_classes); the other bottoms from [-1, 1].
  const std::vector<LayerCase> cases = {
      {R"(name: "euclid" type: "EuclideanLoss")", {{6, 10}, {6, 10}}},
      // Enough values for the sum to use every block of its first pass, several positions each.
      {R"(name: "euclid_big" type: "EuclideanLoss")", {{64, 3, 40, 50}, {64, 6000}}},
      {R"(name: "sce" type: "SigmoidCrossEntropyLoss")", {{6, 10}, {6, 10}}, 1, 1, 2},
      {R"(name: "sce_ignore" type: "SigmoidCrossEntropyLoss" loss_param { ignore_label: 2 normalization: VALID })",
       {{4, 3, 5, 5}, {4, 3, 5, 5}}, 1, 1, 3},
      {R"(name: "sce_full" type: "SigmoidCrossEntropyLoss" loss_param { normalization: FULL })",
       {{4, 7}, {4, 7}}, 1, 1, 2},
      {R"(name: "contrast" type: "ContrastiveLoss" contrastive_loss_param { margin: 3 })",
       {{8, 5}, {8, 5}, {8}}, 1, 2, 2},
      {R"(name: "contrast_legacy" type: "ContrastiveLoss"
          contrastive_loss_param { margin: 4 legacy_version: true })",
       {{8, 5, 1, 1}, {8, 5, 1, 1}, {8, 1, 1, 1}}, 1, 2, 2},
      // Long features: the squared distances are split over several blocks per pair.
      {R"(name: "contrast_long" type: "ContrastiveLoss" contrastive_loss_param { margin: 60 })",
       {{4, 6000}, {4, 6000}, {4}}, 1, 2, 2},
      {R"(name: "hinge_l1" type: "HingeLoss")", {{6, 10}, {6}}, 1, 1, 10},
      {R"(name: "hinge_l2" type: "HingeLoss" hinge_loss_param { norm: L2 })", {{6, 4, 2, 2}, {6}}, 1, 1, 16},
      // Negative "probabilities" are clamped at 1e-20 on both sides, which makes huge but equal gradients.
      {R"(name: "mll" type: "MultinomialLogisticLoss")", {{6, 10}, {6, 1, 1, 1}}, 1, 1, 10},
      {R"(name: "infogain" type: "InfogainLoss" infogain_loss_param { source: ")" + h10 + R"(" })",
       {{6, 10}, {6}}, 1, 1, 10},
      {R"(name: "infogain_spatial" type: "InfogainLoss" loss_weight: 1 loss_weight: 0
          loss_param { ignore_label: 3 normalization: FULL } infogain_loss_param { source: ")" + h4 + R"(" })",
       {{2, 4, 3, 3}, {2, 3, 3}}, 2, 1, 4},
      {R"(name: "infogain_axis" type: "InfogainLoss" loss_param { normalization: BATCH_SIZE }
          infogain_loss_param { axis: -1 source: ")" + h4 + R"(" })",
       {{3, 5, 4}, {3, 5}}, 1, 1, 4},
  };
  for (const auto& c : cases) CompareWithCpu(c);
}

TEST_F(GpuTest, LossGradientChecks) {
  auto labels = [](int bottom, int classes) {
    return [=](const std::vector<Blob<double>*>& b) {
      double* l = b[bottom]->mutable_cpu_data();
      for (int i = 0; i < b[bottom]->count(); ++i) l[i] = (i * 7 + 3) % classes;
    };
  };

  GpuGradientCheck({R"(name: "euclid" type: "EuclideanLoss")", {{4, 5}, {4, 5}}});

  GradientCase sce{R"(name: "sce" type: "SigmoidCrossEntropyLoss" loss_param { ignore_label: -1 })",
                   {{4, 5}, {4, 5}}, 0};
  sce.lo = -3;
  sce.hi = 3;
  sce.fill = [](const std::vector<Blob<double>*>& b) {
    double* t = b[1]->mutable_cpu_data();
    for (int i = 0; i < b[1]->count(); ++i) t[i] = i % 5 == 2 ? -1 : (i % 4) / 3.0;  // targets in [0, 1], some ignored
  };
  GpuGradientCheck(sce);

  for (const char* param : {"contrastive_loss_param { margin: 2 }",
                            "contrastive_loss_param { margin: 2 legacy_version: true }"}) {
    const bool legacy = std::string(param).find("legacy") != std::string::npos;
    for (int bottom = 0; bottom < 2; ++bottom) {
      GradientCase c{std::string(R"(name: "contrast" type: "ContrastiveLoss" )") + param, {{5, 3}, {5, 3}, {5}},
                     bottom};
      c.fill = labels(2, 2);
      // Caffe's gradient inside the margin divides by d + 1e-4 rather than d: off by ~1e-4 relative there.
      c.threshold = legacy ? 1e-6 : 1e-3;
      GpuGradientCheck(c);
    }
  }

  for (const char* norm : {"L1", "L2"}) {
    GradientCase c{std::string(R"(name: "hinge" type: "HingeLoss" hinge_loss_param { norm: )") + norm + " }",
                   {{4, 5}, {4}}, 0};
    c.lo = -2;
    c.hi = 2;
    c.fill = [](const std::vector<Blob<double>*>& b) {
      // Clear of the kinks at x = +-1, which finite differences would straddle.
      double* x = b[0]->mutable_cpu_data();
      for (int i = 0; i < b[0]->count(); ++i) {
        if (std::fabs(std::fabs(x[i]) - 1) < 0.05) x[i] *= 1.2;
      }
      for (int i = 0; i < 4; ++i) b[1]->mutable_cpu_data()[i] = (i * 3) % 5;
    };
    GpuGradientCheck(c);
  }

  GradientCase mll{R"(name: "mll" type: "MultinomialLogisticLoss")", {{4, 5}, {4}}, 0};
  mll.lo = 0.1;  // probabilities, away from the clamp
  mll.hi = 1;
  mll.fill = labels(1, 5);
  mll.step = 1e-5;
  GpuGradientCheck(mll);

  // InfogainLoss with H as a third bottom (no gradient into it), spatial labels, some ignored.
  GradientCase infogain{R"(name: "infogain" type: "InfogainLoss" loss_param { ignore_label: 3 })",
                        {{2, 4, 3}, {2, 3}, {4, 4}}, 0};
  infogain.lo = 0;
  infogain.hi = 2;
  infogain.fill = [](const std::vector<Blob<double>*>& b) {
    const double l[] = {0, 3, 2, 1, 3, 0};
    std::copy(l, l + 6, b[1]->mutable_cpu_data());
  };
  GpuGradientCheck(infogain);
}

}  // namespace
}  // namespace strata
