// DataTransformer: turns one Datum's pixels into the values a net sees, as transform_param says (Caffe's
// semantics and order of operations):
//
//   out[c][y][x] = (in[c][y + h_off][x' + w_off] - mean) * scale,   x' = mirror ? W' - 1 - x : x
//
// where mean is the mean file's value at the same (uncropped) input position, or mean_value[c] (one value
// serves every channel), or 0. With crop_size, TRAIN takes a random crop and TEST the centre one
// (h_off = (H - crop_size) / 2). mirror flips left-right at random in TRAIN only; TEST is deterministic
// (Caffe also mirrors at random in TEST when mirror is set; nobody wants a random evaluation).
//
// Randomness: the transformer draws from its own small engine (splitmix64), seeded at construction and
// re-seedable per example with Reseed(). The Data layer reseeds with (seed, the record's global position),
// so the crop and mirror of a record depend only on where it sits in the stream: a resumed run and N
// data-parallel ranks reproduce exactly the transformed batches of one uninterrupted single-rank run, and
// the prefetch thread's timing never matters. Draw order per example: mirror, then h_off, then w_off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/data/datum.hpp"
#include "strata/proto/strata.pb.h"

namespace strata {

template <typename Dtype>
class DataTransformer {
 public:
  // Reads mean_file now (Error naming the file when it cannot be read); Error on contradictory parameters.
  DataTransformer(const TransformationParameter& param, Phase phase, uint64_t seed = 0);

  // Checks that inputs of shape channels x height x width can be transformed (mean file of the same shape,
  // one mean_value or one per channel, crop no larger than the image) and returns the output shape
  // {C, H', W'}. Error otherwise, naming the mean file and both shapes where it is the mismatch.
  std::vector<int> OutputShape(int channels, int height, int width) const;

  // Transforms one example into `out` (OutputShape's product of values). The input shape must have passed
  // OutputShape (checked cheaply again here, since records may differ).
  void Transform(const DatumPixels& pixels, Dtype* out);
  // Decodes (if encoded, with force_color / force_gray) and transforms.
  void Transform(const Datum& datum, Dtype* out);

  // Restarts the random stream (see the file comment).
  void Reseed(uint64_t seed) { rng_state_ = seed; }
  ColorMode color_mode() const { return color_mode_; }
  const TransformationParameter& param() const { return param_; }

 private:
  uint64_t NextRandom();
  // Uniform in [0, n).
  int Rand(int n) { return static_cast<int>((NextRandom() >> 33) % static_cast<uint64_t>(n)); }
  template <typename Src>
  void TransformPlanes(const Src* in, int channels, int height, int width, Dtype* out);

  TransformationParameter param_;
  Phase phase_;
  Dtype scale_;
  ColorMode color_mode_;
  std::vector<Dtype> mean_values_;  // one, one per channel, or empty
  std::vector<Dtype> mean_file_;    // C*H*W values, or empty
  int mean_channels_ = 0, mean_height_ = 0, mean_width_ = 0;
  uint64_t rng_state_;
  DatumPixels pixels_;
};

}  // namespace strata
