// A custom layer outside libstrata: Softsign, y = x / (1 + |x|), dy/dx = 1 / (1 + |x|)^2. Registered by name with
// REGISTER_LAYER_CLASS, it is used from a prototxt like any built-in layer. main() builds a small net with it, runs
// forward and backward, and checks the layer's gradient against finite differences of the loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "strata/layer_factory.hpp"
#include "strata/math_functions.hpp"
#include "strata/net.hpp"
#include "strata/util/io.hpp"

namespace strata {

template <typename Dtype>
class SoftsignLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  const char* type() const override { return "Softsign"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override {
    const Dtype* x = bottom[0]->cpu_data();
    Dtype* y = top[0]->mutable_cpu_data();
    for (int i = 0; i < bottom[0]->count(); ++i) y[i] = x[i] / (1 + std::fabs(x[i]));
  }
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {
    if (!propagate_down[0]) return;
    const Dtype* x = bottom[0]->cpu_data();
    const Dtype* dy = top[0]->cpu_diff();
    Dtype* dx = bottom[0]->mutable_cpu_diff();
    for (int i = 0; i < bottom[0]->count(); ++i) {
      const Dtype d = 1 + std::fabs(x[i]);
      dx[i] = dy[i] / (d * d);
    }
  }
};

REGISTER_LAYER_CLASS(Softsign);

}  // namespace strata

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
