// The solver's settings, checked once before the first iteration (strata/setting_checks.hpp; docs/reliability.md).
#include <cmath>
#include <cstdint>
#include <string>

#include "strata/common.hpp"
#include "strata/net.hpp"
#include "strata/setting_checks.hpp"
#include "strata/solvers/loss_scaler.hpp"
#include "strata/util/io.hpp"

namespace strata {

namespace {

// Whether any layer of `net` is kept only in phase TEST (include { phase: TEST } or exclude { phase: TRAIN }):
// the net has a test net for test_iter to run.
template <typename LayerList>
bool HasTestLayers(const LayerList& layers) {
  for (const auto& layer : layers) {
    for (const auto& rule : layer.include()) {
      if (rule.has_phase() && rule.phase() == TEST) return true;
    }
    for (const auto& rule : layer.exclude()) {
      if (rule.has_phase() && rule.phase() == TRAIN) return true;
    }
  }
  return false;
}

}  // namespace

void CheckSolverParam(const SolverParameter& param) {
  const int nets = param.has_net() + param.has_net_param() + param.has_train_net() + param.has_train_net_param();
  STRATA_REQUIRE(nets == 1) << "a solver needs exactly one of net, net_param, train_net, train_net_param (found "
                            << nets << ")";
  STRATA_REQUIRE(param.max_iter() >= 0) << "max_iter must not be negative";
  STRATA_REQUIRE(param.iter_size() >= 1) << "iter_size must be at least 1";
  STRATA_REQUIRE(param.average_loss() >= 1) << "average_loss must be at least 1";
  STRATA_REQUIRE(param.regularization_type() == "L2" || param.regularization_type() == "L1")
      << "regularization_type must be L1 or L2, got '" << param.regularization_type() << "'";
  STRATA_REQUIRE(param.test_interval() >= 0) << "test_interval must not be negative";
  STRATA_REQUIRE(param.snapshot() >= 0) << "snapshot must not be negative";

  // Every number finite; the nets inside are checked as they are built.
  SolverParameter own(param);
  own.clear_net_param();
  own.clear_train_net_param();
  own.clear_test_net_param();
  RequireFiniteFields(own, "solver");
  CheckLossScale(param);
  // A negative rate climbs the loss; Caffe takes it, but nobody trains that way on purpose.
  STRATA_REQUIRE(param.base_lr() >= 0) << "base_lr is " << param.base_lr()
                                       << ": a negative learning rate ascends the loss; give a positive base_lr";
  for (int i = 1; i < param.stepvalue_size(); ++i) {
    STRATA_REQUIRE(param.stepvalue(i) > param.stepvalue(i - 1))
        << "stepvalue must increase: entry " << i + 1 << " (" << param.stepvalue(i) << ") follows "
        << param.stepvalue(i - 1) << "; lr_policy multistep steps at each in turn, so the later ones would "
        << "never be reached in time";
  }
  // test_interval with a net that has test layers but no test_iter: Caffe builds no test net and never tests.
  if (param.test_interval() > 0 && param.test_iter_size() == 0 && (param.has_net() || param.has_net_param())) {
    NetParameter net = param.has_net_param() ? param.net_param() : NetParameter();
    if (param.has_net()) ReadNetParamsFromTextFile(param.net(), &net);
    STRATA_REQUIRE(!HasTestLayers(net.layer()) && !HasTestLayers(net.layers()))
        << "test_interval is " << param.test_interval() << " and net '" << net.name()
        << "' has test-phase layers, but no test_iter is given, so it would never be tested; give test_iter "
        << "(the batches of each test)";
  }
}

void CheckGradientContributions(int replicas, int iter_size) {
  constexpr int64_t kMostExact = int64_t{1} << 24;
  const int64_t sum = static_cast<int64_t>(replicas) * iter_size;
  STRATA_REQUIRE(sum <= kMostExact)
      << "iter_size " << iter_size << " x " << replicas << " replica(s) = " << sum << " gradient contributions per "
      << "update: above 2^24 = " << kMostExact << " a float sum no longer takes in another one of the same size";
}

void RequireFiniteWeights(const NetParameter& weights, int iter) {
  for (const auto& layer : weights.layer()) {
    for (int b = 0; b < layer.blobs_size(); ++b) {
      const BlobProto& blob = layer.blobs(b);
      auto finite = [](const auto& values) {
        for (auto v : values) {
          if (!std::isfinite(v)) return false;
        }
        return true;
      };
      STRATA_REQUIRE(finite(blob.data()) && finite(blob.double_data()))
          << "the weights are not finite at iteration " << iter << " (layer '" << layer.name() << "', blob " << b
          << "); training stopped and no snapshot was written (lower base_lr, or check the data)";
    }
  }
}

template <typename Dtype>
void RequireFiniteWeights(const Net<Dtype>& net, int iter) {
  for (int l = 0; l < net.num_layers(); ++l) {
    const auto& blobs = net.layers()[l]->blobs();
    for (size_t b = 0; b < blobs.size(); ++b) {
      // asum is NaN or inf exactly when a value is (or when the sum overflows, which is as unusable).
      const double sum = static_cast<double>(blobs[b]->asum_data());
      STRATA_REQUIRE(std::isfinite(sum)) << "the weights are not finite at iteration " << iter << " (layer '"
                                         << net.layer_names()[l] << "', blob " << b << "); training stopped "
                                         << "(lower base_lr, or check the data)";
    }
  }
}

template void RequireFiniteWeights<float>(const Net<float>&, int);
template void RequireFiniteWeights<double>(const Net<double>&, int);

}  // namespace strata
