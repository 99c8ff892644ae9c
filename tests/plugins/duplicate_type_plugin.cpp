// A plugin that is wrong on purpose (tests/test_plugin.cpp): it registers "Twin", a new type, and "ReLU", which
// Strata already has. Loading it must fail with one message naming ReLU and leave "Twin" unregistered.
#include "strata/layer_factory.hpp"

namespace plugin_test {

template <typename Dtype>
class PassThroughLayer : public strata::Layer<Dtype> {
 public:
  using typename strata::Layer<Dtype>::BlobVec;
  using strata::Layer<Dtype>::Layer;
  const char* type() const override { return "Twin"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override { top[0]->ReshapeLike(*bottom[0]); }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override { top[0]->CopyFrom(*bottom[0]); }
  void Backward_cpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) override {}
};

template <typename Dtype>
using TwinLayer = PassThroughLayer<Dtype>;
template <typename Dtype>
using ReLULayer = PassThroughLayer<Dtype>;

REGISTER_LAYER_CLASS(Twin);
REGISTER_LAYER_CLASS(ReLU);

}  // namespace plugin_test
