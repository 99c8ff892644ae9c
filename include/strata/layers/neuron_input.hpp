// What the element-wise layers whose backward reads their input (AbsVal, Clip, ELU with alpha < 0, Log, Power,
// PReLU, Swish) do when they run in place (top == bottom), where the forward pass overwrites that input:
//  - RequireOwnTopForBackward: refuse the backward with an Error (the forward alone, for inference, is exact);
//  - KeptInput: keep a copy of the input for the backward, as Caffe's PReLU does (PReLU and Swish).
#pragma once

#include <string>
#include <vector>

#include "strata/blob.hpp"
#include "strata/common.hpp"
#include "strata/math_functions.hpp"

namespace strata {

// Throws when `layer` (its describe()) is asked to run backward in place: its gradient reads the input, which
// the in-place forward overwrote and which its output does not determine.
template <typename Dtype>
void RequireOwnTopForBackward(const std::vector<Blob<Dtype>*>& bottom, const std::vector<Blob<Dtype>*>& top,
                              const std::string& layer) {
  STRATA_REQUIRE(bottom[0] != top[0])
      << layer << " cannot run backward in place: its gradient reads its input, which the in-place forward "
      << "overwrote and its output does not determine; give it its own top blob";
}

// A copy of the bottom taken by the forward pass when the layer runs in place; out of place it holds nothing
// and the backward reads the bottom itself. The copy is an activation-sized buffer kept from forward to backward:
// the layer lists blob() in its SavedActivations.
template <typename Dtype>
class KeptInput {
 public:
  KeptInput() { copy_.set_memory_category(MemoryCategory::kActivation); }

  // From the layer's Reshape.
  void Reshape(const Blob<Dtype>& bottom, bool in_place) {
    if (in_place) copy_.ReshapeLike(bottom);
  }
  // From the forward pass, before the output is written.
  void Keep(const Blob<Dtype>& bottom, bool in_place) {
    if (in_place) cpu_copy(bottom.count(), bottom.cpu_data(), copy_.mutable_cpu_data());
    kept_ = in_place;
  }
  // The input values for the backward pass.
  const Dtype* cpu_input(const Blob<Dtype>& bottom, bool in_place) const {
    CHECK(!in_place || kept_) << "in-place layer: the forward pass kept no copy of the input";
    return in_place ? copy_.cpu_data() : bottom.cpu_data();
  }
#ifdef STRATA_USE_CUDA
  void KeepGpu(const Blob<Dtype>& bottom, bool in_place) {
    if (in_place) gpu_copy(bottom.count(), bottom.gpu_data(), copy_.mutable_gpu_data());
    kept_ = in_place;
  }
  const Dtype* gpu_input(const Blob<Dtype>& bottom, bool in_place) const {
    CHECK(!in_place || kept_) << "in-place layer: the forward pass kept no copy of the input";
    return in_place ? copy_.gpu_data() : bottom.gpu_data();
  }
#endif
  Blob<Dtype>* blob() { return &copy_; }

 private:
  Blob<Dtype> copy_;
  bool kept_ = false;
};

}  // namespace strata
