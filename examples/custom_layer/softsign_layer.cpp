// A custom layer outside libstrata: Softsign, y = x / (1 + |x|), dy/dx = 1 / (1 + |x|)^2, registered by name with
// REGISTER_LAYER_CLASS. Built two ways (CMakeLists.txt): into the example program custom_layer.cpp, and as a
// plugin, libsoftsign_layer.so, that the tools load: `strata train --plugin=libsoftsign_layer.so --solver=S`.
#include <cmath>
#include <vector>

#include "strata/layer_factory.hpp"

namespace strata {

template <typename Dtype>
class SoftsignLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  const char* type() const override { return "Softsign"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // Backward reads x, not y: saying so lets training free y once its readers are done (docs/recompute.md, "Blob
  // lifetimes"). A layer that says nothing is taken to read both.
  bool BackwardNeedsTopData() const override { return false; }
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
