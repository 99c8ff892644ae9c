#pragma once

#include "strata/layer.hpp"

namespace strata {

// Caffe's "Embed": a lookup table. The bottom holds integer indices in [0, embed_param.input_dim) (stored as
// Dtype); each is replaced by its row of the input_dim x num_output weight matrix, plus the bias of num_output
// when bias_term (default true): a bottom of shape S gives a top of shape S x num_output. An index out of range,
// or a value that is not an integer, is refused. The indices get no gradient (asking for one is an error); the
// weight rows used receive the sum of their outputs' gradients.
template <typename Dtype>
class EmbedLayer : public Layer<Dtype> {
 public:
  using typename Layer<Dtype>::BlobVec;
  using Layer<Dtype>::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  const char* type() const override { return "Embed"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  // The weight gradient needs the indices.
  bool BackwardNeedsBottomData() const override { return true; }
  bool BackwardNeedsTopData() const override { return false; }

 protected:
  void Forward_cpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_cpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#ifdef STRATA_USE_CUDA
  void Forward_gpu(const BlobVec& bottom, const BlobVec& top) override;
  void Backward_gpu(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom) override;
#endif

 private:
  // Refuses a value that is not an integer in [0, input_dim); `position` is where it is in the bottom.
  void CheckIndex(Dtype value, long long position) const;
  // The refusal of a gradient for the indices.
  void CheckNoBottomGradient(const std::vector<bool>& propagate_down) const;

  int num_output_ = 0;  // N: the width of a row
  int input_dim_ = 0;   // K: the rows
  int lookups_ = 0;     // M: the bottom's count
  bool bias_term_ = true;
  Blob<Dtype> bias_multiplier_;  // M ones, for the bias gradient
};

}  // namespace strata
