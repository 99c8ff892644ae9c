// A project of one's own on an installed Strata: a net built from a prototxt with a custom layer (Softsign,
// softsign_layer.cpp, linked into this program), forward and backward, and the layer's gradient checked against
// finite differences of the loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace {

const char* kNet = R"(
name: "softsign_example"
force_backward: true
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 4 dim: 6 } shape { dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "softsign" type: "Softsign" bottom: "h" top: "s" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

}  // namespace

int main() {
  using strata::Blob;
  try {
    strata::NetParameter param;
    strata::ReadProtoFromTextString(kNet, &param, "softsign_example");
    param.mutable_state()->set_phase(strata::TRAIN);
    strata::Strata::set_random_seed(7);
    strata::Net<double> net(param);
    Blob<double>* x = net.blob_by_name("x").get();
    Blob<double>* label = net.blob_by_name("label").get();
    for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = std::sin(0.9 * i);
    for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data()[i] = i % 5;

    double loss = 0;
    net.Forward(&loss);
    net.ClearParamDiffs();
    net.Backward();
    std::printf("layer softsign has type %s\n", net.layer_by_name("softsign")->type());
    std::printf("loss = %.6f\n", loss);

    // The loss's gradient with respect to x flows through Softsign; compare it with central differences.
    const std::vector<double> grad(x->cpu_diff(), x->cpu_diff() + x->count());
    double worst = 0;
    for (int i = 0; i < x->count(); ++i) {
      const double saved = x->cpu_data()[i], h = 1e-5;
      double plus = 0, minus = 0;
      x->mutable_cpu_data()[i] = saved + h;
      net.Forward(&plus);
      x->mutable_cpu_data()[i] = saved - h;
      net.Forward(&minus);
      x->mutable_cpu_data()[i] = saved;
      worst = std::max(worst, std::fabs((plus - minus) / (2 * h) - grad[i]));
    }
    std::printf("largest gradient error = %.3g\n", worst);
    const bool ok = loss > 0 && worst < 1e-7;
    std::printf(ok ? "custom layer example: OK\n" : "custom layer example: FAILED\n");
    return ok ? 0 : 1;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
