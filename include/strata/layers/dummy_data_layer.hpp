#pragma once

#include <memory>
#include <vector>

#include "strata/filler.hpp"
#include "strata/layer.hpp"

namespace strata {

// Makes its own input, as Caffe's DummyData: N >= 1 tops, shaped by one `shape` for all or one per top (or the
// legacy num/channels/height/width, each given once or per top), filled by 0, 1 or N data_fillers (none: the
// constant 0). A constant filler fills its tops once at setup; any other filler refills them on every forward,
// drawing from the solver's random stream (so a seeded run, and a resumed one, sees the same data).
template <typename Dtype>
class DummyDataLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Shapes are set once, at setup.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  const char* type() const override { return "DummyData"; }
  bool IsBatchSource() const override { return true; }
  bool IsStochastic() const override { return random_; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override {}

 private:
  std::vector<std::unique_ptr<Filler<Dtype>>> fillers_;  // one for all tops, or one per top
  std::vector<bool> refill_;                              // per filler: fill on every forward (not constant)
  bool random_ = false;
};

}  // namespace strata
