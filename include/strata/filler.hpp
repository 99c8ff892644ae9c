// Fillers initialise parameter blobs: constant, uniform, gaussian, positive_unitball, xavier, msra, bilinear.
#pragma once

#include <memory>

#include "strata/blob.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

template <typename Dtype>
class Filler {
 public:
  explicit Filler(const FillerParameter& param) : param_(param) {}
  virtual ~Filler() = default;
  virtual void Fill(Blob<Dtype>* blob) = 0;

 protected:
  // fan_in = count / shape(0), fan_out = count / shape(1), Caffe's convention for conv and FC weights.
  Dtype scale_denominator(const Blob<Dtype>& blob) const;
  FillerParameter param_;
};

// Creates the filler named by param.type(); an unknown type is a user error.
template <typename Dtype>
std::unique_ptr<Filler<Dtype>> GetFiller(const FillerParameter& param);

}  // namespace strata
